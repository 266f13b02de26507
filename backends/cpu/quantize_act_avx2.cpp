// quantize_act_avx2.cpp — the Q8_0/Q8_1/Q8_K and Q16 activation quantizers with AVX2, bit-identical
// to the scalar reference in quantize_act.cpp (llama.cpp's quantize_row_q8_*_ref; Q16) for finite input.
//
// Why this file exists: the scalar quantizers call libm roundf per element (x86-64's baseline has
// no round instruction), ~3 ns each; a decode step quantizes a few hundred rows of 576-2048
// values, which added up to a noticeable slice of a small model's token time.
// Exactness, step by step: the block max is a max (order-free); d and 1/d are the same scalar
// divisions; x*id is one IEEE multiply per lane; roundf is rebuilt exactly as trunc(v) plus
// sign(v) where |v - trunc(v)| >= 0.5 (v - trunc(v) is exact); Q8_K's nearest_int (ties to even
// via the 1.5*2^23 trick, valid for |v| < 2^22) is _mm256_round_ps to nearest.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "common/half.h"
#include "quantize_act.h"

namespace gaacrt::cpu {
namespace {

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline int hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// roundf: round half away from zero.
inline __m256 round_half_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = abs_ps(_mm256_sub_ps(v, t));
  const __m256 step = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(1.0f));  // ±1
  return _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ), step));
}

// Four int32x8 (32 values in order) -> 32 int8 in order. packs works within 128-bit lanes, so
// the result comes out as dword groups 0,2,4,6,1,3,5,7 and one permute puts them back.
inline void store_i8x32(int8_t* dst, __m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);
  const __m256i fixed = _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), fixed);
}

// One 32-value block: returns d, writes q, and Σq (for Q8_1).
inline float quantize_block32(const float* x, int8_t* q, int* sum) {
  __m256 v[4];
  for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(x + 8 * k);
  const float amax = hmax(_mm256_max_ps(_mm256_max_ps(abs_ps(v[0]), abs_ps(v[1])),
                                        _mm256_max_ps(abs_ps(v[2]), abs_ps(v[3]))));
  const float d = amax / 127.0f;
  const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  __m256i qi[4];
  for (int k = 0; k < 4; ++k) qi[k] = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(v[k], id)));
  store_i8x32(q, qi[0], qi[1], qi[2], qi[3]);
  *sum = hsum(_mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])));
  return d;
}

void q8_0_row(const float* x, void* vy, int64_t n) {
  block_q8_0* y = static_cast<block_q8_0*>(vy);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    int sum;
    y[i].d = f32_to_fp16(quantize_block32(x + i * QK8_0, y[i].qs, &sum));
  }
}

void q8_1_row(const float* x, void* vy, int64_t n) {
  block_q8_1* y = static_cast<block_q8_1*>(vy);
  for (int64_t i = 0; i < n / QK8_1; ++i) {
    int sum;
    const float d = quantize_block32(x + i * QK8_1, y[i].qs, &sum);
    y[i].d = f32_to_fp16(d);
    y[i].s = f32_to_fp16(static_cast<float>(sum) * d);
  }
}

void q8_k_row(const float* x, void* vy, int64_t n) {
  block_q8_k* y = static_cast<block_q8_k*>(vy);
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 32; ++k) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + 8 * k)));
    const float amax = hmax(m);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    // The reference keeps the first element whose |x| is the largest (strict '>' in its scan).
    float max = 0.0f;
    const __m256 target = _mm256_set1_ps(amax);
    for (int k = 0; k < 32; ++k) {
      const int hit = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + 8 * k)), target, _CMP_EQ_OQ));
      if (hit) { max = x[8 * k + __builtin_ctz(static_cast<unsigned>(hit))]; break; }
    }
    const float iscale = -127.0f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    const __m256i lim = _mm256_set1_epi32(127);
    for (int g = 0; g < 8; ++g) {  // 32 values at a time
      __m256i qi[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 v = _mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * g + 8 * k));
        qi[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), lim);
      }
      store_i8x32(y[i].qs + 32 * g, qi[0], qi[1], qi[2], qi[3]);
      y[i].bsums[2 * g] = static_cast<int16_t>(hsum(_mm256_add_epi32(qi[0], qi[1])));
      y[i].bsums[2 * g + 1] = static_cast<int16_t>(hsum(_mm256_add_epi32(qi[2], qi[3])));
    }
    y[i].d = 1.0f / iscale;
  }
}

// Q16 (quantize_act.h): the scalar steps, 8 lanes at a time. nearest_int's ties-to-even is
// _mm256_round_ps to nearest; the clamp to ±32767 is the scalar one, so packs never saturates.
void q16_row(const float* x, void* dst, int64_t n) {
  const int64_t nb = n / 32;
  float* d = static_cast<float*>(dst);
  float* s = d + nb;
  int16_t* q = reinterpret_cast<int16_t*>(s + nb);
  const __m256i lim = _mm256_set1_epi32(32767), nlim = _mm256_set1_epi32(-32767);
  for (int64_t i = 0; i < nb; ++i, x += 32, q += 32) {
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(x + 8 * k);
    const float amax = hmax(_mm256_max_ps(_mm256_max_ps(abs_ps(v[0]), abs_ps(v[1])),
                                          _mm256_max_ps(abs_ps(v[2]), abs_ps(v[3]))));
    const float di = amax >= kQ16MinAmax ? amax / 32767.0f : 0.0f;
    const __m256 id = _mm256_set1_ps(di != 0.0f ? 1.0f / di : 0.0f);
    __m256i qi[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 r = _mm256_round_ps(_mm256_mul_ps(v[k], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      qi[k] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(r), lim), nlim);
    }
    // packs works within 128-bit lanes: (a0-3 b0-3 | a4-7 b4-7) -> 64-bit groups 0,2,1,3 restore order.
    const __m256i ab = _mm256_permute4x64_epi64(_mm256_packs_epi32(qi[0], qi[1]), 0xD8);
    const __m256i cd = _mm256_permute4x64_epi64(_mm256_packs_epi32(qi[2], qi[3]), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), ab);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 16), cd);
    d[i] = di;
    s[i] = di * static_cast<float>(hsum(_mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]))));
  }
}

}  // namespace

QuantizeRowFn quantize_q16_avx2() { return &q16_row; }

QuantizeRowFn quantize_act_avx2(GGMLType act) {
  switch (act) {
    case GGMLType::Q8_0: return &q8_0_row;
    case GGMLType::Q8_1: return &q8_1_row;
    case GGMLType::Q8_K: return &q8_k_row;
    default: return nullptr;
  }
}

}  // namespace gaacrt::cpu
