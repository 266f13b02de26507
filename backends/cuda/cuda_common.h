// cuda_common.h — error checking shared by the CUDA backend's launchers.
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

}  // namespace gaacrt::cuda
