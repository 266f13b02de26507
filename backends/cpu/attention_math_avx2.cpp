// attention_math_avx2.cpp — the attention inner loops (attention_math.h) with AVX2/FMA; compiled
// with -mavx2 -mfma -mf16c and used only after cpuid says yes. Explicit FMA intrinsics only, so
// the float operations are the same whatever the compiler's contraction setting.
#include <immintrin.h>

#include <cmath>

#include "attention_math.h"
#include "exp_avx2.h"

namespace gaacrt::cpu {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One dot product: four 8-lane FMA chains (so the adds overlap), then the tail serially.
inline float dot1(const float* q, const float* r, int32_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int32_t c = 0;
  for (; c + 32 <= n; c += 32) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(r + c), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + c + 8), _mm256_loadu_ps(r + c + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + c + 16), _mm256_loadu_ps(r + c + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + c + 24), _mm256_loadu_ps(r + c + 24), a3);
  }
  for (; c + 8 <= n; c += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(r + c), a0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; c < n; ++c) s += q[c] * r[c];
  return s;
}

void dots(const float* q, const float* rows, int32_t n_rows, int32_t dim, float* out) {
  for (int32_t j = 0; j < n_rows; ++j) out[j] = dot1(q, rows + (int64_t)j * dim, dim);
}

void exp_n(const float* x, float* y, int32_t n) {
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
  if (i < n) {  // the tail through one padded vector, so every element takes the same polynomial
    alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int32_t k = i; k < n; ++k) buf[k - i] = x[k];
    _mm256_store_ps(buf, exp8(_mm256_load_ps(buf)));
    for (int32_t k = i; k < n; ++k) y[k] = buf[k - i];
  }
}

void scale(float* y, float s, int32_t n) {
  const __m256 v = _mm256_set1_ps(s);
  int32_t c = 0;
  for (; c + 8 <= n; c += 8) _mm256_storeu_ps(y + c, _mm256_mul_ps(_mm256_loadu_ps(y + c), v));
  for (; c < n; ++c) y[c] *= s;
}

// y += Σ_j w_j · row_j, 32 columns at a time held in registers across all rows (each element
// still sums its rows in order j = 0, 1, ...), then the rest 8 and 1 at a time.
void acc_rows(float* y, const float* w, const float* rows, int32_t n_rows, int32_t dim) {
  int32_t c = 0;
  for (; c + 32 <= dim; c += 32) {
    __m256 a0 = _mm256_loadu_ps(y + c), a1 = _mm256_loadu_ps(y + c + 8), a2 = _mm256_loadu_ps(y + c + 16),
           a3 = _mm256_loadu_ps(y + c + 24);
    for (int32_t j = 0; j < n_rows; ++j) {
      const float* r = rows + (int64_t)j * dim + c;
      const __m256 wj = _mm256_set1_ps(w[j]);
      a0 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(r), a0);
      a1 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(r + 8), a1);
      a2 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(r + 16), a2);
      a3 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(r + 24), a3);
    }
    _mm256_storeu_ps(y + c, a0);
    _mm256_storeu_ps(y + c + 8, a1);
    _mm256_storeu_ps(y + c + 16, a2);
    _mm256_storeu_ps(y + c + 24, a3);
  }
  for (; c + 8 <= dim; c += 8) {
    __m256 a = _mm256_loadu_ps(y + c);
    for (int32_t j = 0; j < n_rows; ++j) a = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), _mm256_loadu_ps(rows + (int64_t)j * dim + c), a);
    _mm256_storeu_ps(y + c, a);
  }
  for (; c < dim; ++c)
    for (int32_t j = 0; j < n_rows; ++j) y[c] = std::fma(w[j], rows[(int64_t)j * dim + c], y[c]);
}

void bf16_rows(const uint16_t* src, float* dst, int32_t n) {  // bf16 is the top half of an fp32
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
  }
  for (; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(src[i]) << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    dst[i] = f;
  }
}

}  // namespace

const AttentionMath* attention_math_avx2() {
  static const AttentionMath m{&dots, &exp_n, &scale, &acc_rows, &bf16_rows};
  return &m;
}

}  // namespace gaacrt::cpu
