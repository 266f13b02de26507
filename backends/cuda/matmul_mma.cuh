// matmul_mma.cuh — the tensor-core prefill matmul of quantized weights (matmul_mma.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace gaacrt::cuda {

// The kernel of prefill-sized matmuls of quantized weights, GAACRT_CUDA_MMA_MATMUL (read on every
// call): unset, the backend's activation precision (act_bits 16: q16, the default; 8: q8); "q16"
// int8 tensor cores on the CPU backend's 16-bit activations (matmul_q8mma.cu), "q8" the same on
// 8-bit ones, "bf16" bf16 hi/lo tensor cores (this file's
// matmul_mma, also the path of types the int8 kernel does not read), "0" matmul.cu's CUDA-core
// fp32 reference. pp512 of the 8B shape on the H200 (bench/results/cuda_h200.md): bf16 2,162,
// q16 5,767, q8 6,304 tok/s. Precision decides the default: q8 rounds x to 8 bits per 32 values,
// and the E8/KIVI2 caches' whole-model GPU-vs-CPU logits then drift past the tests' bounds (a
// lossy code flips on a small change of K: 0.069 against 3e-2); q16 sums the CPU's own integers.
// Two fp16 kernels were measured and dropped: weights dequantized and rounded to fp16 (6,141
// tok/s, E8 worst row 0.0745 against 5e-2), and exact weight codes with x in two fp16 parts and a
// per-slice scale (precise, 4,611 tok/s: twice the mma per slice outweighed the lighter epilogue).
// Unset, the backend's activation precision picks q16 or q8 (BackendParams::act_bits).
enum class PrefillMatmul { Reference, Bf16, Q8, Q16 };
PrefillMatmul prefill_matmul(bool q16);
// y(n_tok, w.n_rows) = x · wᵀ (+ bias) for a quantized w with n_cols a multiple of 32; returns
// false (nothing launched) for other weights.
bool matmul_mma(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, cudaStream_t stream);

}  // namespace gaacrt::cuda
