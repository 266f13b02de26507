// matmul_q8mma.cuh — the int8 tensor-core prefill matmul of quantized weights (matmul_q8mma.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace gaacrt::cuda {

// Scratch bytes of matmul_q8mma for n_tok tokens of n_cols.
size_t matmul_q8mma_scratch_bytes(int64_t n_tok, int64_t n_cols, bool q16);
// y(n_tok, w.n_rows) = x · wᵀ (+ bias) with x quantized per 32 values into scratch: to int8 (the
// decode path's activations), or q16 to the CPU backend's 16-bit ones. Returns false (nothing
// launched) for weights the int8 paths do not read (matvec_q8_supported), n_cols not a multiple
// of 32, or (q16) x not 16-byte aligned.
// Tokens per thread block, GAACRT_CUDA_Q8MMA_TOKENS (read on every call): 64, or 128 (each warp
// 32 rows x 32 tokens instead of 32 x 16: the step's weight unpacking and the A fragments serve
// twice the tokens). The same arithmetic per output either way, so the same bits.
int matmul_q8mma_token_tile();
bool matmul_q8mma(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, bool q16,
                  void* scratch, cudaStream_t stream);

}  // namespace gaacrt::cuda
