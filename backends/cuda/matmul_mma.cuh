// matmul_mma.cuh — the tensor-core prefill matmul of quantized weights (matmul_mma.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace gaacrt::cuda {

// The kernel of prefill-sized matmuls of quantized weights, GAACRT_CUDA_MMA_MATMUL (read on every
// call): "q8" / "q16" int8 tensor cores on 8-bit / 16-bit activations (matmul_q8mma.cu), "bf16"
// bf16 hi/lo tensor cores (this file's matmul_mma), "0" matmul.cu's CUDA-core fp32 reference;
// unset, the default (bf16). The q8 path is 2.5x faster (pp512, 8B shape, H200: 5,169 vs 2,077
// tok/s) and passes its op tests, but with it the E8/KIVI2 caches' whole-model logits drift past
// the 3e-2 the GPU-vs-CPU tests allow (0.069 in tests/test_bench_hooks.py: the CPU quantizes
// activations to 16 bits, and a lossy code flips on a small change of K). q16 computes the CPU's
// integers on the same tensor cores; it is written and compiled but has not run on a GPU yet.
enum class PrefillMatmul { Reference, Bf16, Q8, Q16 };
PrefillMatmul prefill_matmul();
// y(n_tok, w.n_rows) = x · wᵀ (+ bias) for a quantized w with n_cols a multiple of 32; returns
// false (nothing launched) for other weights.
bool matmul_mma(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, cudaStream_t stream);

}  // namespace gaacrt::cuda
