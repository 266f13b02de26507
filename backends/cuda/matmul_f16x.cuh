// matmul_f16x.cuh — the fp16 tensor-core prefill matmul on exact weight codes (matmul_f16x.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace gaacrt::cuda {

// Scratch bytes of matmul_f16x for n_tok tokens of n_cols.
size_t matmul_f16x_scratch_bytes(int64_t n_tok, int64_t n_cols);
// y(n_tok, w.n_rows) = x · wᵀ (+ bias), x split into two fp16 parts in scratch. Returns false
// (nothing launched) for weights the piece readers do not cover (matvec_q8_supported), n_cols not
// a multiple of 32 or x not 16-byte aligned.
bool matmul_f16x(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, void* scratch,
                 cudaStream_t stream);

}  // namespace gaacrt::cuda
