// cuda_common.h — error checking and launch-size helpers shared by the CUDA backend's launchers.
#pragma once
#include <cuda_runtime.h>

#include "common/error.h"

namespace gaacrt::cuda {

// Throws Error("backend", "cuda_error") naming the failing call and CUDA's message.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error("backend", e == cudaErrorMemoryAllocation ? "out_of_memory" : "cuda_error",
                strfmt("cuda: %s: %s", what, cudaGetErrorString(e)));
}

#define GAACRT_CUDA_CHECK(call) ::gaacrt::cuda::check((call), #call)

constexpr int kWarpSize = 32;

// Blocks of `threads` covering n items with a grid-stride loop (capped: the loop does the rest).
inline unsigned grid_for_items(int64_t n, int threads) {
  const int64_t g = (n + threads - 1) / threads;
  return static_cast<unsigned>(g < 1 ? 1 : (g > 65536 ? 65536 : g));
}

#ifdef __CUDACC__
__device__ __forceinline__ float warp_sum_f32(float v) {
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum_f64(double v) {
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
#endif

}  // namespace gaacrt::cuda
