// matmul_mma.cu — prefill-sized y(n_tok, n_rows) = x · wᵀ of quantized weights on tensor cores.
//
// The prefill path of the weight types the int8 kernel (matmul_q8mma.cu, the default) does not
// read, and GAACRT_CUDA_MMA_MATMUL=bf16 (2,162 tok/s pp512 on the Llama-3.1-8B shape on the H200,
// 58x matmul.cu's CUDA-core reference kernel; bench/results/cuda_h200.md; tests run all paths).
//
// A thread block computes 32 weight rows x 64 tokens, stepping through the columns 256 at a time:
// its threads dequantize the 32 rows' blocks of those columns with the portable dequant_block()
// (every weight type in one template) and convert the 64 tokens' activations, both into shared
// memory as two bf16 parts (v = hi + lo, |v - hi - lo| <= 2^-17 |v|), then 8 warps — 2 of 16 rows
// x 4 of 16 tokens — run mma.sync m16n8k16 on hi·hi + hi·lo + lo·hi (lo·lo, ~2^-18, is dropped),
// accumulating in fp32: close to the fp32 reference rather than bf16's 2^-9.
#include "matmul_mma.cuh"

#include <cstdlib>
#include <cstring>

#include "block_traits.cuh"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "kernels/attention_ptx.cuh"
#include "quant/dequant.h"

namespace gaacrt::cuda {
namespace {

constexpr int kRowsT = 32, kToksT = 64, kKc = 256;  // tile: rows x tokens, columns per step
constexpr int kStride = kKc + 8;  // bf16 elements per shared row: 16 spare bytes keep ldmatrix conflict-free
constexpr int kThreads = 256;
constexpr size_t kSmemBytes = (size_t)2 * (kRowsT + kToksT) * kStride * sizeof(uint16_t);

// Stores v[0..n) (n even) as bf16 hi and lo parts at hi[0..n), lo[0..n).
__device__ __forceinline__ void store_split(const float* v, int n, uint16_t* hi, uint16_t* lo) {
  for (int j = 0; j < n; j += 2) {
    const uint32_t h = attn::pack_bf16x2(v[j], v[j + 1]);
    *reinterpret_cast<uint32_t*>(hi + j) = h;
    *reinterpret_cast<uint32_t*>(lo + j) = attn::pack_bf16x2(v[j] - attn::bf16_lo(h), v[j + 1] - attn::bf16_hi(h));
  }
}

template <typename Block, int QK>
__global__ void __launch_bounds__(kThreads) matmul_mma_kernel(const uint8_t* __restrict__ w, size_t row_stride,
                                                              int64_t n_rows, int64_t n_cols,
                                                              const float* __restrict__ x, int64_t n_tok,
                                                              float* __restrict__ y, const float* __restrict__ bias) {
  pdl_begin();
  GAACRT_DYNAMIC_SMEM(smem);
  uint16_t* w_hi = reinterpret_cast<uint16_t*>(smem);
  uint16_t* w_lo = w_hi + kRowsT * kStride;
  uint16_t* x_hi = w_lo + kRowsT * kStride;
  uint16_t* x_lo = x_hi + kToksT * kStride;
  const int64_t row0 = (int64_t)blockIdx.x * kRowsT, tok0 = (int64_t)blockIdx.y * kToksT;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
  const int wr = warp & 1, wt = warp >> 1;  // this warp's rows 16 wr.., tokens 16 wt..
  const int mi = lane >> 3, ri = lane & 7;  // ldmatrix: this lane's matrix and row
  const int64_t n_blocks = n_cols / QK;
  float acc[2][4] = {};

  for (int64_t c0 = 0; c0 < n_cols; c0 += kKc) {
    constexpr int kBpc = kKc / QK;  // weight blocks per row in a step
    for (int t = threadIdx.x; t < kRowsT * kBpc; t += kThreads) {
      const int r = t / kBpc, bi = t % kBpc;
      const int64_t row = row0 + r, b = c0 / QK + bi;
      float v[QK];
      if (row < n_rows && b < n_blocks)
        dequant_block(StoredBlock<Block>::at(w + row * row_stride, b), v);
      else
        for (int j = 0; j < QK; ++j) v[j] = 0.f;  // past the matrix: zeros add nothing
      store_split(v, QK, w_hi + r * kStride + bi * QK, w_lo + r * kStride + bi * QK);
    }
    for (int t = threadIdx.x; t < kToksT * (kKc / 4); t += kThreads) {
      const int tk = t / (kKc / 4), c = (t % (kKc / 4)) * 4;
      float v[4] = {0.f, 0.f, 0.f, 0.f};
      if (tok0 + tk < n_tok && c0 + c < n_cols)  // n_cols is a multiple of 32: all four or none
        for (int j = 0; j < 4; ++j) v[j] = x[(tok0 + tk) * n_cols + c0 + c + j];
      store_split(v, 4, x_hi + tk * kStride + c, x_lo + tk * kStride + c);
    }
    __syncthreads();
#pragma unroll 4
    for (int kk = 0; kk < kKc; kk += 16) {
      // A (16 rows x 16 columns): matrices (rows 0-7 | 8-15) x (columns 0-7 | 8-15), row-major.
      // B (16 columns x 16 tokens), two n-tiles of 8 tokens: x rows are tokens, columns contiguous.
      const int a_off = (16 * wr + 8 * (mi & 1) + ri) * kStride + kk + 8 * (mi >> 1);
      const int b_off = (16 * wt + 8 * (mi >> 1) + ri) * kStride + kk + 8 * (mi & 1);
      uint32_t ah[4], al[4], bh[4], bl[4];
      attn::ldmatrix_x4(ah, w_hi + a_off);
      attn::ldmatrix_x4(al, w_lo + a_off);
      attn::ldmatrix_x4(bh, x_hi + b_off);
      attn::ldmatrix_x4(bl, x_lo + b_off);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        attn::mma_bf16(acc[nt], ah, bh[2 * nt], bh[2 * nt + 1]);
        attn::mma_bf16(acc[nt], ah, bl[2 * nt], bl[2 * nt + 1]);
        attn::mma_bf16(acc[nt], al, bh[2 * nt], bh[2 * nt + 1]);
      }
    }
    __syncthreads();
  }
  // C: lane holds rows g and g + 8 of its 16, tokens 2 tig and 2 tig + 1 of each n-tile.
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t row = row0 + 16 * wr + g + 8 * (e >> 1), tok = tok0 + 16 * wt + 8 * nt + 2 * tig + (e & 1);
      if (row < n_rows && tok < n_tok) y[tok * n_rows + row] = bias ? acc[nt][e] + bias[row] : acc[nt][e];
    }
}

template <typename Block, int QK>
void launch_mma(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, cudaStream_t stream) {
  constexpr auto kernel = matmul_mma_kernel<Block, QK>;
  allow_dynamic_smem<kernel>(kSmemBytes);
  const dim3 grid((unsigned)((w.n_rows + kRowsT - 1) / kRowsT), (unsigned)((n_tok + kToksT - 1) / kToksT));
  launch_kernel(kernel, grid, kThreads, kSmemBytes, stream, static_cast<const uint8_t*>(w.data), w.row_stride,
                w.n_rows, w.n_cols, x, n_tok, y, bias);
}

}  // namespace

PrefillMatmul prefill_matmul(bool q16) {
  const char* e = std::getenv("GAACRT_CUDA_MMA_MATMUL");
  if (!e || !*e) return q16 ? PrefillMatmul::Q16 : PrefillMatmul::Q8;
  if (!std::strcmp(e, "q16")) return PrefillMatmul::Q16;
  if (!std::strcmp(e, "0")) return PrefillMatmul::Reference;
  if (!std::strcmp(e, "q8")) return PrefillMatmul::Q8;
  if (!std::strcmp(e, "bf16")) return PrefillMatmul::Bf16;
  throw Error("backend", "invalid_argument", strfmt("GAACRT_CUDA_MMA_MATMUL=%s: expected q16, q8, bf16 or 0", e));
}

bool matmul_mma(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, cudaStream_t stream) {
  if (w.n_cols % 32 != 0 || n_tok > 65535LL * kToksT) return false;
  return dispatch_weight(w, [&](auto bt) {
    using BT = decltype(bt);
    launch_mma<typename BT::block, BT::qk>(w, x, n_tok, y, bias, stream);
  });
}

}  // namespace gaacrt::cuda
