// gaac_host.cpp — gaac_decode_tile_fast (see gaac_host.h). Per lane: the exponents of its 8 groups
// come from gaac_format.h's word functions (one 32-bit add per 4 channels); per chunk (2 groups =
// 16 values, one 16-byte load of sign+mantissa bytes) the BF16 bytes are formed and interleaved by
// SIMD: high byte = s | e >> 1, low byte = (e & 1) << 7 | m, then unpack low/high bytes into
// 16-bit values — the step that costs a dozen scalar operations per 4 values.
#include "gaac_host.h"

#include <cstring>

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#define GAAC_HOST_SSE2 1
#elif defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#define GAAC_HOST_NEON 1
#endif

namespace gaacrt {
namespace {

// 16 BF16 values (two groups) from 16 sm bytes and 16 exponents; the first 8 to o0, the rest to o1.
inline void bf16x16(const uint8_t* sm, const uint32_t e[4], uint16_t* o0, uint16_t* o1) {
#if defined(GAAC_HOST_SSE2)
  const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sm));
  const __m128i x = _mm_set_epi32(static_cast<int>(e[3]), static_cast<int>(e[2]), static_cast<int>(e[1]),
                                  static_cast<int>(e[0]));
  const __m128i k80 = _mm_set1_epi8(static_cast<char>(0x80)), k7f = _mm_set1_epi8(0x7F);
  // Byte shifts by 16-bit shifts + masks: the bits that cross into a neighbour byte are masked off.
  const __m128i hb = _mm_or_si128(_mm_and_si128(s, k80), _mm_and_si128(_mm_srli_epi16(x, 1), k7f));
  const __m128i lb = _mm_or_si128(_mm_and_si128(_mm_slli_epi16(x, 7), k80), _mm_and_si128(s, k7f));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(o0), _mm_unpacklo_epi8(lb, hb));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(o1), _mm_unpackhi_epi8(lb, hb));
#elif defined(GAAC_HOST_NEON)
  const uint8x16_t s = vld1q_u8(sm);
  const uint8x16_t x = vreinterpretq_u8_u32(vld1q_u32(e));
  const uint8x16_t hb = vorrq_u8(vandq_u8(s, vdupq_n_u8(0x80)), vshrq_n_u8(x, 1));
  const uint8x16_t lb = vorrq_u8(vshlq_n_u8(x, 7), vandq_u8(s, vdupq_n_u8(0x7F)));
  const uint8x16x2_t z = vzipq_u8(lb, hb);
  vst1q_u8(reinterpret_cast<uint8_t*>(o0), z.val[0]);
  vst1q_u8(reinterpret_cast<uint8_t*>(o1), z.val[1]);
#else
  for (int k = 0; k < 2; ++k) {
    uint16_t* o = k ? o1 : o0;
    const GaacU32x2 p = gaac_bf16x4(gaac_ld32(sm + 8 * k), e[2 * k]), q = gaac_bf16x4(gaac_ld32(sm + 8 * k + 4), e[2 * k + 1]);
    const uint32_t w[4] = {p.lo, p.hi, q.lo, q.hi};
    std::memcpy(o, w, 16);  // little-endian hosts: word k holds values 2k, 2k+1
  }
#endif
}

}  // namespace

const char* gaac_decode_tile_fast_isa() {
#if defined(GAAC_HOST_SSE2)
  return "sse2";
#elif defined(GAAC_HOST_NEON)
  return "neon";
#else
  return "portable";
#endif
}

GaacCheck gaac_decode_tile_fast(const uint8_t* slot, int32_t d, uint32_t capacity, const uint8_t* b3, const uint8_t* b4,
                                uint16_t* out, int32_t stride) {
  const GaacCheck c = gaac_validate(slot, gaac_tile_dim_ok(d) ? gaac_fixed_bytes(d) + capacity : 0u, d, capacity, -1);
  if (c.status != GAAC_OK) return c;
  const int32_t nl = gaac_lanes(d), G = gaac_group_cols(d);
  const uint8_t* esc = slot + gaac_fixed_bytes(d);
  uint32_t xo = 0, ro = 0;
  for (int32_t l = 0; l < nl; ++l) ro += gaac_popc(gaac_tag_masks(gaac_lane_tags(slot, d, l)).x);
  for (int32_t l = 0; l < nl; ++l) {
    const int32_t h = l >= G ? 1 : 0, g = l - h * G;
    const uint32_t t16 = gaac_lane_tags(slot, d, l);
    const GaacU32x2 w3 = {gaac_ld32(b3 + 8 * g), gaac_ld32(b3 + 8 * g + 4)};
    const GaacU32x2 w4 = {gaac_ld32(b4 + 8 * g), gaac_ld32(b4 + 8 * g + 4)};
    uint32_t w[6];
    for (int32_t k = 0; k < 6; ++k) w[k] = gaac_ld32(slot + gaac_code_word_offset(d, l, k));
    for (int32_t i = 0; i < 4; ++i) {  // chunk i: groups j = 2i (token 4i + 2h) and 2i + 1 (the next)
      uint32_t e[4];
      for (int32_t s = 0; s < 2; ++s) {
        const int32_t j = 2 * i + s;
        const uint32_t tag = (t16 >> (2 * j)) & 3u;
        const int32_t set = 3 * (j >> 2);
        const GaacU32x2 low3 = gaac_group_codes(w[set], w[set + 1], w[set + 2], j & 3);
        if (tag == GAAC_TAG_3BIT) {  // ~90% of groups: one add per 4 channels, no escapes
          e[2 * s] = w3.lo + low3.lo;
          e[2 * s + 1] = w3.hi + low3.hi;
          continue;
        }
        const uint32_t x = esc[xo++];
        uint32_t r4 = 0;
        if (tag == GAAC_TAG_RAW) { r4 = gaac_ld32(esc + ro); ro += 4; }
        const GaacU32x2 ex = gaac_group_exponents(tag, w3, w4, low3, x, r4);
        e[2 * s] = ex.lo;
        e[2 * s + 1] = ex.hi;
      }
      const int32_t t = 4 * i + 2 * h;
      bf16x16(slot + 16u * static_cast<uint32_t>(i * nl + l), e, out + t * stride + 8 * g,
              out + (t + 1) * stride + 8 * g);
    }
  }
  return c;
}

}  // namespace gaacrt
