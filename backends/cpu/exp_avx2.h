// exp_avx2.h — a vectorized exp for the AVX2 files (include only from *_avx2.cpp, which are built
// with -mavx2 -mfma): the softmax of attention_math_avx2.cpp and the SiLU / GELU gates of
// elementwise_avx2.cpp. Internal linkage, as the other AVX2 helpers, so no copy built for one
// instruction set can be merged into code that runs on another.
#pragma once
#include <immintrin.h>

#include <cmath>

namespace gaacrt::cpu {
namespace {

// exp(x) = 2^k · e^r with k = round(x·log2 e), r = x − k·ln 2 (ln 2 split in two so k·ln2_hi is
// exact), e^r by the degree-6 polynomial of Cephes' expf on |r| <= ln2/2. Inputs below -86
// (e^x < 5e-38, a few times the smallest normal float; -inf included) give 0, above 88.376
// (past FLT_MAX) give +inf.
inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-86.0f), hi = _mm256_set1_ps(88.3762626647949f);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ), over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^k as 2^(k-1)·2: k in [-124, 128] after the clamp, and 2^128 has no float of its own
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(126)), 23);
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), _mm256_set1_ps(2.0f));
  y = _mm256_andnot_ps(under, y);
  return _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
}

}  // namespace
}  // namespace gaacrt::cpu
