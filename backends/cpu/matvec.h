// matvec.h — quantized matrix-vector (decode) and matrix-matrix (prefill) products on the CPU.
//
// As llama.cpp does (shared/spec/gguf.md §2.9): the activation row is quantized once, then integer
// dot products accumulate per block and are scaled once (vec_dot.h). act_bits picks the
// activation format (quantize_act.h): 8 = the weight type's llama.cpp "vec_dot type" (Q8_0 for
// Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants and IQ4_XS), 16 = Q16 for
// every quantized type (int16 with a scale per 32 values: ~1e-5 instead of ~1e-2 relative error
// per activation). Float weights (F32/F16/BF16) take fp32 activations either way. Each ISA
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
// to scalar). Throws Error("quant", ...) for an unsupported type, a row length that is not a
// multiple of the block size, or act_bits other than 8 or 16, naming the value.
void matmul(const WeightView& w, const float* x, int64_t n_tok, float* y, ThreadPool& pool, Isa isa, int act_bits = 8);

// n_w (1..kMaxMatmulGroup) matmuls of one input: y[i](n_tok, w[i].n_rows) = x(n_tok, n_cols) · w[i]ᵀ, every w[i]
// with the same n_cols (Q/K/V, gate/up). x is quantized once per distinct activation format
// (once in all at act_bits 16, where every quantized type takes Q16), and all the products run
// in one dispatch of the pool. Each y[i] is bit-identical to matmul(w[i], x, ...).
constexpr int kMaxMatmulGroup = 4;
void matmuls(int n_w, const WeightView* w, const float* x, int64_t n_tok, float* const* y, ThreadPool& pool, Isa isa,
             int act_bits = 8);

// How many weight rows one prefill step keeps hot while every token of the batch passes over
// them (exposed for the tests, which make sure odd splits are exercised).
int64_t matmul_row_chunk(size_t row_bytes);

}  // namespace gaacrt::cpu
