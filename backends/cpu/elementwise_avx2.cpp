// elementwise_avx2.cpp — the act_mul gates (elementwise.cpp) 8 at a time with AVX2/FMA, for CPUs
// where cpuid says yes, in the same forms as the plain loops: SiLU g/(1+e^-g)·u and GELU-tanh
// g/(1+e^-2z)·u. exp is exp_avx2.h's polynomial, so results differ from the plain std::exp path
// by ~1e-7 relative.
#include "exp_avx2.h"
#include "ops.h"

namespace gaacrt::cpu {
namespace {

inline __m256 silu_mul(__m256 g, __m256 u) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u);
}

inline __m256 gelu_mul(__m256 g, __m256 u) {
  const __m256 one = _mm256_set1_ps(1.0f);
  // -2z = -2·sqrt(2/pi)·g·(1 + 0.044715 g²)
  const __m256 m2z = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f * 0.79788456080286535588f), g),
                                   _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), _mm256_mul_ps(g, g), one));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, exp8(m2z))), u);
}

template <__m256 (*F)(__m256, __m256)>
void gate(const float* g, const float* u, int64_t n, float* h) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(h + i, F(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
  if (i < n) {  // the tail through one padded vector: every element takes the same path
    alignas(32) float gb[8] = {0, 0, 0, 0, 0, 0, 0, 0}, ub[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t k = i; k < n; ++k) { gb[k - i] = g[k]; ub[k - i] = u[k]; }
    _mm256_store_ps(gb, F(_mm256_load_ps(gb), _mm256_load_ps(ub)));
    for (int64_t k = i; k < n; ++k) h[k] = gb[k - i];
  }
}

}  // namespace

ActMulFn act_mul_avx2(Activation act) { return act == Activation::SiLU ? &gate<silu_mul> : &gate<gelu_mul>; }

}  // namespace gaacrt::cpu
