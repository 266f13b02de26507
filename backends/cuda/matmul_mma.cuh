// matmul_mma.cuh — the tensor-core prefill matmul of quantized weights (matmul_mma.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace gaacrt::cuda {

// GAACRT_CUDA_MMA_MATMUL=1 (read on every call): the path is off by default until it has run on a GPU.
bool mma_matmul_enabled();
// y(n_tok, w.n_rows) = x · wᵀ (+ bias) for a quantized w with n_cols a multiple of 32; returns
// false (nothing launched) for other weights.
bool matmul_mma(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, cudaStream_t stream);

}  // namespace gaacrt::cuda
