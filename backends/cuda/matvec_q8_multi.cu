// matvec_q8_multi.cu — up to three decode matvecs over one quantized x in one launch (Q, K and V
// where the fused Q/K/V + RoPE launch of qkv_rope.cu does not apply). matvec_q8.cu says how the
// dot products work; a file of its own so the build compiles it beside the other matvec kernels.
#include "block_traits.cuh"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "kernels/matvec_rows.cuh"
#include "matvec_q8.cuh"

namespace gaacrt::cuda {
using namespace matvec;
namespace {

// Up to three matrices of one type and width over the same quantized x (Q, K, V) in one launch.
struct MultiArgs {
  const uint8_t* w[3];
  size_t stride[3];
  int64_t rows[3];
  float* y[3];
  const float* bias[3];
  unsigned first[4];  // first thread block of each matrix; first[n_w] = the grid
};

template <typename Block, int QK, int T, bool kQ16, bool kNorm>
__global__ void __launch_bounds__(rows_per_block<kNorm>() * kWarpSize)
matvec_q8_multi_kernel(MultiArgs a, int64_t n_cols, int n_tok, XQ x, NormX nx) {
  constexpr int R = rows_per_block<kNorm>();
  const int i = blockIdx.x >= a.first[1] ? (blockIdx.x >= a.first[2] ? 2 : 1) : 0;
  const int64_t row = (int64_t)(blockIdx.x - a.first[i]) * R + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t n_rows = a.rows[i];
  if (!kNorm && row >= n_rows) return;  // kNorm: every warp takes part in the prologue
  float acc[1][T];
  const uint8_t* rows[1] = {a.w[i] + (row < n_rows ? row : n_rows - 1) * a.stride[i]};
  rows_dots<Block, QK, T, kQ16>(rows, (int)n_cols, n_tok, x, lane, acc, XPrologue<kNorm, kQ16>{x, nx, n_tok, n_cols});
  if (row >= n_rows) return;
  const float* bias = a.bias[i];
#pragma unroll
  for (int t = 0; t < T; ++t) {
    if (t >= n_tok) break;
    if (lane == 0) a.y[i][(int64_t)t * n_rows + row] = bias ? acc[0][t] + bias[row] : acc[0][t];
  }
}

}  // namespace

void matvec_q8_multi(const WeightView* w, int n_w, float* const* y, const float* const* bias, const Q8Act& a,
                     cudaStream_t stream, const NormX* norm) {
  if (n_w < 1 || n_w > 3) throw Error("backend", "invalid_argument", strfmt("cuda matvec_q8_multi: %d matrices", n_w));
  bool same = true;
  for (int i = 0; i < n_w; ++i) {
    check_q8(w[i], a.n_tok, a.n_cols, "matvec_q8_multi");
    same = same && w[i].type == w[0].type && w[i].layout == w[0].layout;
  }
  norm = norm_in_launch(norm, same, a, stream);
  if (!same) {  // mixed types: one launch per matrix over the same quantized x (matvec_q8_quantized)
    for (int i = 0; i < n_w; ++i) matvec_q8_quantized(w[i], a, y[i], bias ? bias[i] : nullptr, stream);
    return;
  }
  const int R = rows_per_block(norm != nullptr);
  MultiArgs m{};
  m.first[0] = 0;
  for (int i = 0; i < 3; ++i) {
    const bool on = i < n_w;
    m.w[i] = on ? static_cast<const uint8_t*>(w[i].data) : nullptr;
    m.stride[i] = on ? w[i].row_stride : 0;
    m.rows[i] = on ? w[i].n_rows : 0;
    m.y[i] = on ? y[i] : nullptr;
    m.bias[i] = on && bias ? bias[i] : nullptr;
    m.first[i + 1] = m.first[i] + (unsigned)((m.rows[i] + R - 1) / R);
  }
  launch_q8_norm_kernel(w[0], a, norm, m.first[3], m, stream, [](auto bt, auto nt, auto bits, auto kn) {
    using BT = decltype(bt);
    return matvec_q8_multi_kernel<typename BT::block, BT::qk, decltype(nt)::value, decltype(bits)::value,
                                  decltype(kn)::value>;
  });
}

}  // namespace gaacrt::cuda
