// matvec.h — quantized matrix-vector (decode) and matrix-matrix (prefill) products on the CPU.
//
// As llama.cpp does (shared/spec/gguf.md §2.9): the activation row is quantized once to the
// weight type's "vec_dot type" (Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1, Q8_K for
// the K-quants and IQ4_XS; quantize_act.h), then integer dot products accumulate per block and
// are scaled once (vec_dot.h). Float weights (F32/F16/BF16) take fp32 activations. Each ISA
// (scalar reference, AVX2, NEON) implements the same vec_dot functions; the scalar path is the
// reference the others are tested against.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "cpu_features.h"
#include "thread_pool.h"

namespace gaacrt::cpu {

// y(n_tok, w.n_rows) = x(n_tok, w.n_cols) · wᵀ, rows split across the pool's threads.
// isa picks the kernels (an ISA this CPU lacks, or one without a kernel for w.type, falls back
// to scalar). Throws Error("quant", ...) for an unsupported type or a row length that is not a
// multiple of the block size, naming the value.
void matmul(const WeightView& w, const float* x, int64_t n_tok, float* y, ThreadPool& pool, Isa isa);

// How many weight rows one prefill step keeps hot while every token of the batch passes over
// them (exposed for the tests, which make sure odd splits are exercised).
int64_t matmul_row_chunk(size_t row_bytes);

}  // namespace gaacrt::cpu
