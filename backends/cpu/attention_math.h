// attention_math.h — the inner loops of the CPU attention (attention.cpp), per ISA: q·k dot
// products against a block's keys, the online-softmax exponentials, the rescale and weighted sum
// of a block's value rows, and BF16 rows to fp32. Chosen once per process (attention_math()), so
// every call of the attention runs the same float operations on the same inputs: results stay
// bit-identical between batch compositions and between cache formats that decode to the same
// values (DESIGN.md "What must stay true").
//
// The AVX2 and NEON sets (attention_math_{avx2,neon}.cpp) sum each dot product in 4 vector lanes
// of accumulators, accumulate V rows with FMA and use a polynomial exp (relative error ~1e-7 on
// the softmax's range x <= 0), so they differ from the plain set (serial sums, std::exp) at
// float-rounding level only.
#pragma once
#include <cstdint>

namespace gaacrt::cpu {

struct AttentionMath {
  // out[j] = Σ_c q[c]·rows[j·dim + c] for j < n_rows.
  void (*dots)(const float* q, const float* rows, int32_t n_rows, int32_t dim, float* out);
  // y[j] = exp(x[j]) for j < n (in use x <= 0: scores minus their running max; exp(-inf) = 0).
  void (*exp)(const float* x, float* y, int32_t n);
  // y[c] *= s for c < n.
  void (*scale)(float* y, float s, int32_t n);
  // y[c] += w[j]·rows[j·dim + c] for j < n_rows in order of j, c < dim.
  void (*acc_rows)(float* y, const float* w, const float* rows, int32_t n_rows, int32_t dim);
  // dst[i] = bf16 src[i] as fp32 (exact) for i < n.
  void (*bf16_to_f32)(const uint16_t* src, float* dst, int32_t n);
};

const AttentionMath& attention_math();         // the fastest set this CPU runs
const AttentionMath& attention_math_scalar();  // the plain C++ set the others are tested against
const AttentionMath* attention_math_avx2();    // nullptr where not compiled in; needs cpu_has_avx2()
const AttentionMath* attention_math_neon();    // nullptr where not compiled in (aarch64 only)

}  // namespace gaacrt::cpu
