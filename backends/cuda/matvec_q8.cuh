// matvec_q8.cuh — decode-sized matmul with 8-bit activations and integer dot products (dp4a).
#pragma once
#include <cuda_runtime.h>

#include "backend/backend.h"

namespace gaacrt::cuda {

constexpr int kMatvecQ8MaxTokens = 8;

// True when matvec_q8 handles this weight type.
bool matvec_q8_supported(GGMLType t);
// Bytes of scratch matvec_q8 needs for n_tok tokens of n_cols.
size_t matvec_q8_scratch_bytes(int64_t n_tok, int64_t n_cols);
// y(n_tok, w.n_rows) = x · wᵀ (+ bias), n_tok <= kMatvecQ8MaxTokens, x quantized to int8 per 32 values.
void matvec_q8(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, void* scratch,
               cudaStream_t stream);

}  // namespace gaacrt::cuda
