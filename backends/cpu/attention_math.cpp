// attention_math.cpp — the plain C++ attention inner loops (attention_math.h) and the per-CPU choice.
#include "attention_math.h"

#include <cmath>

#include "common/half.h"
#include "cpu_features.h"

namespace gaacrt::cpu {
namespace {

void dots(const float* q, const float* rows, int32_t n_rows, int32_t dim, float* out) {
  for (int32_t j = 0; j < n_rows; ++j) {
    const float* r = rows + (int64_t)j * dim;
    float s = 0.f;
    for (int32_t c = 0; c < dim; ++c) s += q[c] * r[c];
    out[j] = s;
  }
}
void exp_n(const float* x, float* y, int32_t n) {
  for (int32_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}
void scale(float* y, float s, int32_t n) {
  for (int32_t i = 0; i < n; ++i) y[i] *= s;
}
void acc_rows(float* y, const float* w, const float* rows, int32_t n_rows, int32_t dim) {
  for (int32_t j = 0; j < n_rows; ++j)
    for (int32_t c = 0; c < dim; ++c) y[c] += w[j] * rows[(int64_t)j * dim + c];
}
void bf16_rows(const uint16_t* src, float* dst, int32_t n) {
  for (int32_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace

const AttentionMath& attention_math_scalar() {
  static const AttentionMath m{&dots, &exp_n, &scale, &acc_rows, &bf16_rows};
  return m;
}

#if !(defined(__x86_64__) || defined(_M_X64) || defined(__i386__))
const AttentionMath* attention_math_avx2() { return nullptr; }  // attention_math_avx2.cpp: x86 only
#endif
#if !defined(__aarch64__)
const AttentionMath* attention_math_neon() { return nullptr; }  // attention_math_neon.cpp: aarch64 only
#endif

const AttentionMath& attention_math() {
  static const AttentionMath* m = [] {
    const AttentionMath* simd = cpu_has_avx2() ? attention_math_avx2() : attention_math_neon();
    return simd ? simd : &attention_math_scalar();
  }();
  return *m;
}

}  // namespace gaacrt::cpu
