// row_norm.cuh — 1 / sqrt(mean(x²) + eps) of one row by a whole thread block, shared by
// rms_norm.cu and the fused norm + quantize of matvec_q8.cu so that the two sum the squares in
// the same order and agree to the bit (tests/test_fused_ops.py). The sum is taken in double like
// the CPU reference (backends/cpu/rms_norm.cpp).
//
// A row of dim floats is read as float4 quads when dim % 4 == 0 and the pointers allow it (up to
// kNormCache quads per thread, loaded at once: dim <= 4,096 is a single memory round trip), else
// one float per thread. Thread t sums quads (or floats) t, t + T, t + 2T, ... in order; the lanes'
// sums meet by xor shuffles, then the warps' sums by the same shuffles. T = norm_threads(dim) is a
// function of dim alone, and more threads than that (their zeros) give the same bits.
#pragma once
#include <cstdint>

#include "../cuda_common.h"

namespace gaacrt::cuda {

// At most 1,024 threads a row: one quad per thread up to 4,096 values. (Capping it at a matvec
// block's 256, so that rows past 1,024 could be normed inside the matvec with the same bits, made
// the 8B shape's norm_quant 4.1 -> 4.7 µs on the H200, and the in-matvec norm of 4,096 values cost
// far more than it saved: tg128 396 -> 290 tok/s.)
constexpr int kNormMaxThreads = 1024;
constexpr int kNormCache = 4;  // quads a thread keeps in registers for the second pass

inline bool norm_quads(int64_t dim) { return dim % 4 == 0; }

// Threads per row: one per item (quad or float), a multiple of 32, at most kNormMaxThreads.
inline int norm_threads(int64_t dim) {
  const int64_t n = norm_quads(dim) ? dim / 4 : dim, t = (n + kWarpSize - 1) / kWarpSize * kWarpSize;
  return (int)(t < kWarpSize ? kWarpSize : (t > kNormMaxThreads ? kNormMaxThreads : t));
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

#ifdef __CUDACC__
__device__ __forceinline__ double sumsq(double ss, float4 v) {
  ss += (double)v.x * v.x;
  ss += (double)v.y * v.y;
  ss += (double)v.z * v.z;
  return ss + (double)v.w * v.w;
}

// The block's total of the threads' ss, turned into 1 / sqrt(ss / dim + eps) (every thread gets it).
__device__ __forceinline__ float block_inv_rms(double ss, int64_t dim, float eps) {
  __shared__ double part[kNormMaxThreads / kWarpSize];
  ss = warp_sum_f64(ss);
  if (threadIdx.x % kWarpSize == 0) part[threadIdx.x / kWarpSize] = ss;
  __syncthreads();
  // Every warp sums the warps' partials by the same xor shuffles (a fixed order, so every warp
  // and every kernel using this gets the same bits): 5 steps instead of a serial loop of up to 32.
  const int lane = threadIdx.x % kWarpSize;
  const double total = warp_sum_f64(lane < (int)(blockDim.x / kWarpSize) ? part[lane] : 0.0);
  return (float)(1.0 / sqrt(total / (double)dim + (double)eps));
}

// Quads: the row's n4 = dim / 4 quads; thread t's first kNormCache quads (t + k·T) are left in c
// (zeros past the row) for the caller's second pass.
__device__ __forceinline__ float row_inv_rms4(const float4* xr, int64_t n4, float eps,
                                              float4 (&c)[kNormCache]) {
#pragma unroll
  for (int k = 0; k < kNormCache; ++k) {
    const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
    c[k] = i < n4 ? xr[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  double ss = 0.0;
#pragma unroll
  for (int k = 0; k < kNormCache; ++k) ss = sumsq(ss, c[k]);
  for (int64_t i = threadIdx.x + (int64_t)kNormCache * blockDim.x; i < n4; i += blockDim.x) ss = sumsq(ss, xr[i]);
  return block_inv_rms(ss, 4 * n4, eps);
}

// One float per thread (dim % 4 != 0 or unaligned rows).
__device__ __forceinline__ float row_inv_rms1(const float* xr, int64_t dim, float eps) {
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += (double)xr[i] * xr[i];
  return block_inv_rms(ss, dim, eps);
}
#endif

}  // namespace gaacrt::cuda
