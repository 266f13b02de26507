// matmul_q8mma.cuh — the int8 tensor-core prefill matmul of quantized weights (matmul_q8mma.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace gaacrt::cuda {

// y(n_tok, w.n_rows) = x · wᵀ (+ bias) with x quantized to int8 per 32 values into scratch
// (matvec_q8_scratch_bytes(n_tok, w.n_cols)); returns false (nothing launched) for weights the
// int8 paths do not read (matvec_q8_supported) or n_cols not a multiple of 32.
bool matmul_q8mma(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, void* scratch,
                  cudaStream_t stream);

}  // namespace gaacrt::cuda
