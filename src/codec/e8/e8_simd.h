// e8_simd.h — the host SIMD helpers of the E8 codec (host C++ only, not portable): a fixed-order
// 8-lane dot product and the 8-lane block decode. SSE2 and NEON are the baselines of x86-64 and
// aarch64, so nothing is dispatched at run time; other targets take the scalar loops, which
// produce the same bits (same lanes, same combination order, no FMA: the core builds with
// -ffp-contract=off).
#pragma once
#include <cstdint>

#include "common/half.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace gaacrt {

// Dot product in 8 lanes (d is a multiple of 8), combined as ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7))
// on every path, so the SIMD and scalar versions give the same bits.
inline float e8_dot8(const float* a, const float* b, int32_t d) {
#if defined(__SSE2__)
  __m128 lo = _mm_setzero_ps(), hi = _mm_setzero_ps();
  for (int32_t j = 0; j < d; j += 8) {
    lo = _mm_add_ps(lo, _mm_mul_ps(_mm_loadu_ps(a + j), _mm_loadu_ps(b + j)));
    hi = _mm_add_ps(hi, _mm_mul_ps(_mm_loadu_ps(a + j + 4), _mm_loadu_ps(b + j + 4)));
  }
  float l[8];
  _mm_storeu_ps(l, lo);
  _mm_storeu_ps(l + 4, hi);
#elif defined(__ARM_NEON)
  float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
  for (int32_t j = 0; j < d; j += 8) {
    lo = vaddq_f32(lo, vmulq_f32(vld1q_f32(a + j), vld1q_f32(b + j)));
    hi = vaddq_f32(hi, vmulq_f32(vld1q_f32(a + j + 4), vld1q_f32(b + j + 4)));
  }
  float l[8];
  vst1q_f32(l, lo);
  vst1q_f32(l + 4, hi);
#else
  float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int32_t j = 0; j < d; j += 8)
    for (int k = 0; k < 8; ++k) l[k] += a[j + k] * b[j + k];
#endif
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

// out = (b XOR m) + sh for 8 lanes: a decoded block from its base point, sign masks and shift.
inline void e8_decode_block8(const float* b, const uint32_t* m, float sh, float* out) {
#if defined(__SSE2__)
  const __m128 s4 = _mm_set1_ps(sh);
  for (int k = 0; k < 8; k += 4) {
    const __m128 v = _mm_xor_ps(_mm_loadu_ps(b + k), _mm_castsi128_ps(_mm_loadu_si128((const __m128i*)(m + k))));
    _mm_storeu_ps(out + k, _mm_add_ps(v, s4));
  }
#elif defined(__ARM_NEON)
  const float32x4_t s4 = vdupq_n_f32(sh);
  for (int k = 0; k < 8; k += 4) {
    const uint32x4_t v = veorq_u32(vreinterpretq_u32_f32(vld1q_f32(b + k)), vld1q_u32(m + k));
    vst1q_f32(out + k, vaddq_f32(vreinterpretq_f32_u32(v), s4));
  }
#else
  for (int k = 0; k < 8; ++k) out[k] = bits_to_f32(f32_to_bits(b[k]) ^ m[k]) + sh;
#endif
}

}  // namespace gaacrt
