// matvec_gate_up.cuh — the decode FFN's gate and up matvecs with the activation in one launch:
// h = act(x·gateᵀ) ⊙ (x·upᵀ). The kernel and its launch, instantiated once with the norm inside
// the launch (matvec_q8_gate_up_norm.cu) and once without (matvec_q8_gate_up.cu, which also holds
// the host entry point): two files, so the build compiles the halves in parallel.
#pragma once
#include "../block_traits.cuh"
#include "../cuda_backend.h"
#include "../cuda_common.h"
#include "../matvec_q8.cuh"
#include "activation.cuh"
#include "matvec_rows.cuh"

namespace gaacrt::cuda::matvec {

// A warp takes row r of gate and up (activation.cuh's gating).
template <typename Block, int QK, int T, bool kQ16, bool kNorm, int kAct>
__global__ void __launch_bounds__(rows_per_block<kNorm>() * kWarpSize)
matvec_q8_gate_up_kernel(const uint8_t* __restrict__ wg, size_t sg, const uint8_t* __restrict__ wu, size_t su,
                         int64_t n_rows, int64_t n_cols, int n_tok, XQ x, NormX nx, float* __restrict__ h) {
  const int64_t row = (int64_t)blockIdx.x * rows_per_block<kNorm>() + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (!kNorm && row >= n_rows) return;  // kNorm: every warp takes part in the prologue
  float acc[2][T];  // gate, up
  const int64_t r = row < n_rows ? row : n_rows - 1;
  const uint8_t* rows[2] = {wg + r * sg, wu + r * su};
  rows_dots<Block, QK, T, kQ16>(rows, (int)n_cols, n_tok, x, lane, acc, XPrologue<kNorm, kQ16>{x, nx, n_tok, n_cols});
  if (row >= n_rows) return;
#pragma unroll
  for (int t = 0; t < T; ++t) {
    if (t >= n_tok) break;
    if (lane != 0) continue;
    h[(int64_t)t * n_rows + row] = act_gate<kAct>(acc[0][t], acc[1][t]);
  }
}

// The launch over gate and up's rows (checked by matvec_q8_gate_up); kNorm: nx is normed and
// quantized inside it.
template <bool kNorm>
void launch_gate_up(const WeightView& gate, const WeightView& up, Activation act, float* h, const Q8Act& a,
                    const NormX& nx, cudaStream_t stream) {
  constexpr int R = rows_per_block<kNorm>();
  const unsigned grid = (unsigned)((gate.n_rows + R - 1) / R);
  const size_t smem = kNorm ? norm_smem_bytes(a) : 0;
  dispatch_q8(gate, a, [&](auto bt, auto nt, auto bits) {
    using BT = decltype(bt);
    constexpr int T = decltype(nt)::value;
    constexpr bool kQ16 = decltype(bits)::value;
    const auto* g = static_cast<const uint8_t*>(gate.data);
    const auto* u = static_cast<const uint8_t*>(up.data);
    auto run = [&](auto kernel) {
      launch_kernel(kernel, grid, R * kWarpSize, smem, stream, g, gate.row_stride, u, up.row_stride, gate.n_rows,
                    a.n_cols, (int)a.n_tok, xq_of(a), nx, h);
    };
    if (act == Activation::SiLU) run(matvec_q8_gate_up_kernel<typename BT::block, BT::qk, T, kQ16, kNorm, 0>);
    else run(matvec_q8_gate_up_kernel<typename BT::block, BT::qk, T, kQ16, kNorm, 1>);
  });
  GAACRT_CUDA_CHECK(cudaGetLastError());
}


extern template void launch_gate_up<true>(const WeightView&, const WeightView&, Activation, float*, const Q8Act&,
                                          const NormX&, cudaStream_t);
extern template void launch_gate_up<false>(const WeightView&, const WeightView&, Activation, float*, const Q8Act&,
                                           const NormX&, cudaStream_t);

}  // namespace gaacrt::cuda::matvec
