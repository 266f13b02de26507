// matmul.cu — y(n_tok, n_rows) = x(n_tok, n_cols) · wᵀ on the GPU.
//
// Decode-sized calls (up to 8 tokens) of quantized weights go to matvec_q8.cu: int8 activations,
// __dp4a integer dot products. Prefill-sized calls of quantized weights go to the tensor cores,
// chosen by GAACRT_CUDA_MMA_MATMUL (matmul_mma.cuh): matmul_q8mma.cu (int8 on the CPU's 16-bit
// activations, the default, or on 8-bit ones; prefill_group also gives it the fused ops of
// fused.cu, several weights read with one x in one launch) or matmul_mma.cu (bf16 hi/lo parts,
// also the path of the types the int8 one does not read). The rest (float weights, or
// GAACRT_CUDA_MMA_MATMUL=0) take the reference path here: one warp per (row, token), each lane
// dequantizes whole blocks through the portable dequant_block() and accumulates in fp32, then a
// warp reduction.
#include <cstdlib>

#include "block_traits.cuh"
#include "common/half.h"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "matmul_mma.cuh"
#include "matmul_q8mma.cuh"
#include "matvec_q8.cuh"
#include "quant/dequant.h"

namespace gaacrt::cuda {
namespace {

constexpr int kWarp = 32;

__device__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename Block, int QK>
__global__ void matmul_blocks_kernel(const uint8_t* __restrict__ w, size_t row_stride, int64_t n_rows,
                                     int64_t n_cols, const float* __restrict__ x, float* __restrict__ y,
                                     const float* __restrict__ bias) {
  pdl_begin();
  const int64_t row = (int64_t)blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int64_t tok = blockIdx.y;
  const int lane = threadIdx.x % kWarp;
  if (row >= n_rows) return;
  const uint8_t* blocks = w + row * row_stride;
  const float* xr = x + tok * n_cols;
  float acc = 0.f;
  for (int64_t b = lane; b < n_cols / QK; b += kWarp) {
    float v[QK];
    dequant_block(StoredBlock<Block>::at(blocks, b), v);
    for (int j = 0; j < QK; ++j) acc = __fmaf_rn(v[j], xr[b * QK + j], acc);
  }
  acc = warp_sum(acc);
  if (lane == 0) y[tok * n_rows + row] = bias ? acc + bias[row] : acc;
}

template <int kType>
__global__ void matmul_float_kernel(const uint8_t* __restrict__ w, size_t row_stride, int64_t n_rows,
                                    int64_t n_cols, const float* __restrict__ x, float* __restrict__ y,
                                    const float* __restrict__ bias) {
  pdl_begin();
  const int64_t row = (int64_t)blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int64_t tok = blockIdx.y;
  const int lane = threadIdx.x % kWarp;
  if (row >= n_rows) return;
  const uint8_t* wr = w + row * row_stride;
  const float* xr = x + tok * n_cols;
  float acc = 0.f;
  for (int64_t c = lane; c < n_cols; c += kWarp) {
    float v;
    if (kType == 0) v = reinterpret_cast<const float*>(wr)[c];
    else if (kType == 1) v = fp16_to_f32(reinterpret_cast<const uint16_t*>(wr)[c]);
    else v = bf16_to_f32(reinterpret_cast<const uint16_t*>(wr)[c]);
    acc = __fmaf_rn(v, xr[c], acc);
  }
  acc = warp_sum(acc);
  if (lane == 0) y[tok * n_rows + row] = bias ? acc + bias[row] : acc;
}

}  // namespace

bool CudaBackend::prefill_group(const MmaGroup& g, const float* x, int64_t n_tok) {
  // GAACRT_CUDA_PREFILL_GROUP=0 (read on every call): a launch per weight, act_mul and add after
  // them, as before the groups (for comparison).
  const char* e = std::getenv("GAACRT_CUDA_PREFILL_GROUP");
  if (e && e[0] == '0' && (g.n > 1 || g.ep != MmaEpilogue::Store)) return false;
  const PrefillMatmul path = prefill_matmul(q16_);
  const bool q16 = path == PrefillMatmul::Q16;
  if ((path != PrefillMatmul::Q8 && !q16) || n_tok <= kMatvecQ8MaxTokens || n_tok > 65535 || g.n < 1) return false;
  for (int i = 0; i < g.n; ++i)
    if (g.w[i].n_cols % 32 != 0 || !matvec_q8_supported(g.w[i].type)) return false;
  if (!matmul_q8mma_group(g, x, n_tok, q16, scratch(matmul_q8mma_scratch_bytes(n_tok, g.w[0].n_cols, q16)), stream_))
    return false;
  GAACRT_CUDA_CHECK(cudaGetLastError());
  return true;
}

void CudaBackend::matmul(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias) {
  const TypeTraits* tr = type_traits(w.type);
  if (!tr || !tr->supported)
    throw Error("backend", "unsupported_type", strfmt("cuda matmul: type %s is not supported", type_name(w.type)));
  if (n_tok <= 0 || w.n_rows <= 0) return;
  if (n_tok > 65535) throw Error("backend", "invalid_argument", "cuda matmul: more than 65535 tokens in one call");
  if (n_tok <= kMatvecQ8MaxTokens && w.n_cols % 32 == 0 && matvec_q8_supported(w.type)) {
    // One launch (each block quantizes x) where that is cheaper than quantizing x in its own.
    if (matvec_q8_self(w, x, n_tok, y, bias, stream_, q16_)) return;
    matvec_q8(w, x, n_tok, y, bias, scratch(matvec_q8_scratch_bytes(n_tok, w.n_cols)), stream_, q16_);
    return;
  }
  float* const ys[1] = {y};
  const float* const bs[1] = {bias};
  if (prefill_group(MmaGroup{&w, 1, ys, bs}, x, n_tok)) return;
  const PrefillMatmul path = prefill_matmul(q16_);  // tensor cores: int8 (above) or bf16 (matmul_mma.cu)
  if (path != PrefillMatmul::Reference && matmul_mma(w, x, n_tok, y, bias, stream_)) {
    GAACRT_CUDA_CHECK(cudaGetLastError());
    return;
  }
  constexpr int kRowsPerBlock = 4;
  const dim3 grid(static_cast<unsigned>((w.n_rows + kRowsPerBlock - 1) / kRowsPerBlock), static_cast<unsigned>(n_tok));
  const dim3 block(kRowsPerBlock * kWarp);
  const auto* wp = static_cast<const uint8_t*>(w.data);
  auto run = [&](auto kernel) {
    launch_kernel(kernel, grid, block, 0, stream_, wp, w.row_stride, w.n_rows, w.n_cols, x, y, bias);
  };
  const bool quantized = dispatch_weight(w, [&](auto bt) {
    using BT = decltype(bt);
    run(matmul_blocks_kernel<typename BT::block, BT::qk>);
  });
  if (!quantized) {
    if (w.type == GGMLType::F32) run(matmul_float_kernel<0>);
    else if (w.type == GGMLType::F16) run(matmul_float_kernel<1>);
    else run(matmul_float_kernel<2>);
  }
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gaacrt::cuda
