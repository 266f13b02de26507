// gaac_fp8_format.h — GAAC on FP8 KV (shared/spec/gaac.md "FP8 variants"; seed 000 appendix
// "Relation to FP8 KV"): FP8 conversion and the FP8 tile (portable: C++, CUDA and MSL).
//
// ---- Element ----------------------------------------------------------------------------------
// E4M3 (OCP "e4m3fn": bias 7, no Inf, S.1111.111 = NaN, max 448) and E5M2 (bias 15, IEEE-like
// Inf/NaN, max 57344). Values are quantized as x / scale, round to nearest even, saturating to the
// largest finite value (Inf too; NaN stays NaN); scale is per (layer, K|V, kv-head) from calibration.
// GAAC keeps sm = s << M | m (4 bits for E4M3, 3 for E5M2) and codes the E-bit exponent field
// (4 or 5 bits) with the BF16 scheme's groups of 8 channels, 2-bit tags and calibrated bases.
//
// ---- Modes (chosen by measurement: bench/gaac_fp8_modes.py; GPL-3 calibration, Apache-2.0) ---
// tag 0: 2-bit code e - b2   tag 1: 3-bit code e - b3   tag 2: raw (code e)   tag 3: reserved
// Measured codec ratios of the candidate sets (SmolLM2-135M / Gemma-3-270M real KV):
//   E4M3 {2,3,raw} 1.136 / 1.125   {1,3,raw} 1.094 / 1.089   {1,2,raw} 1.050 / 1.038
//   E5M2 {2,3,raw} 1.302 / 1.284   {3,4,raw} 1.259 / 1.255   {1,3,raw} 1.247 / 1.237
//        {2,4,raw} 1.205 / 1.190   {1,4,raw} 1.112 / 1.110   {1,2,raw} 1.094 / 1.075
// so both formats use {2-bit, 3-bit, raw}. The low 2 bits of every code go to the common stream;
// escapes: 1 X byte per tag-1/2 group (bit 2 of each code), and per raw group an R record of E - 3
// bytes (E4M3: 1 byte = bit 3; E5M2: 2 bytes = bit 3, bit 4), bit m of each byte = channel m.
//
// ---- Slot bytes, D = tile_dim, L = D/4 lanes, the lane map of gaac_format.h ------------------
//   E4M3                       E5M2
//   [0, 8D)  sm nibbles        [0, 4D) sm words W0..W3 of lane l at 16*l   (3-bit values packed
//            half H of lane l  [4D,6D) sm words W4..W5 of lane l at 8*l     exactly like the BF16
//            (groups 4H..4H+3): 16 bytes at 16*(H*L + l); word j%4 = group j:  tile's 3-bit codes)
//            byte b = sm of channel b | sm of channel b+4 << 4
//   S = 8D (E4M3) or 6D (E5M2):
//   [S, S+4D)      2-bit codes: 16 bytes per lane at S + 16*l; word k holds groups 2k and 2k+1:
//                  byte b, bits 4*(j%2) + 0..1 = code of channel b, + 2..3 = channel b+4
//   [S+4D, S+4.5D) tags, uint16 per lane (bits 2j..2j+1 = group j), as in the BF16 tile
//   S+4.5D         escape area: X stream, then R stream (group order q = 8*lane + j)
// Fixed part: E4M3 12.5*D (1600 for D = 128), E5M2 10.5*D (1344); an FP8 tile is 16*D bytes.
#pragma once
#include "gaac_format.h"
#include "../../common/half.h"

namespace gaacrt {

enum GaacFp8Kind : int32_t { GAAC_FP8_E4M3 = 0, GAAC_FP8_E5M2 = 1 };
constexpr int32_t GAAC_FP8_W0 = 2, GAAC_FP8_W1 = 3;   // the narrow and wide mode widths
constexpr float GAAC_FP8_HEADROOM = 2.0f;  // scale = headroom * amax / fp8 max, rounded up to a power of two

GAACRT_HD int32_t gaac_fp8_mbits(int32_t k) { return k == GAAC_FP8_E4M3 ? 3 : 2; }
GAACRT_HD int32_t gaac_fp8_ebits(int32_t k) { return k == GAAC_FP8_E4M3 ? 4 : 5; }
GAACRT_HD float gaac_fp8_max(int32_t k) { return k == GAAC_FP8_E4M3 ? 448.0f : 57344.0f; }
GAACRT_HD uint32_t gaac_fp8_r_bytes(int32_t k) { return (uint32_t)gaac_fp8_ebits(k) - 3u; }
GAACRT_HD uint32_t gaac_fp8_codes_offset(int32_t k, int32_t d) { return (k == GAAC_FP8_E4M3 ? 8u : 6u) * (uint32_t)d; }
GAACRT_HD uint32_t gaac_fp8_tags_offset(int32_t k, int32_t d) { return gaac_fp8_codes_offset(k, d) + 4u * (uint32_t)d; }
GAACRT_HD uint32_t gaac_fp8_fixed_bytes(int32_t k, int32_t d) { return gaac_fp8_tags_offset(k, d) + (uint32_t)d / 2u; }
GAACRT_HD uint32_t gaac_fp8_slot_bytes(int32_t k, int32_t d, uint32_t cap) { return gaac_fp8_fixed_bytes(k, d) + cap; }
GAACRT_HD uint32_t gaac_fp8_raw_tile_bytes(int32_t d) { return GAAC_TILE_TOKENS * (uint32_t)d; }
GAACRT_HD uint32_t gaac_fp8_max_escape_bytes(int32_t k, int32_t d) { return 2u * (uint32_t)d * (1u + gaac_fp8_r_bytes(k)); }
GAACRT_STATIC_ASSERT(12 * 128 + 64 == 1600 && 10 * 128 + 64 == 1344, "FP8 fixed parts, D = 128");

// ---- conversion ---------------------------------------------------------------------------------
// f32 -> FP8 bits, round to nearest even, saturating to the largest finite value (satfinite).
GAACRT_HD uint32_t gaac_fp8_from_f32(int32_t k, float f) {
  const uint32_t M = (uint32_t)gaac_fp8_mbits(k), E = (uint32_t)gaac_fp8_ebits(k), bias = (1u << (E - 1)) - 1u;
  const uint32_t u = f32_to_bits(f), s = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return s | (k == GAAC_FP8_E4M3 ? 0x7Fu : 0x7Eu);            // NaN
  if (a >= (k == GAAC_FP8_E4M3 ? 0x43E00000u : 0x47600000u))                       // >= max finite
    return s | (k == GAAC_FP8_E4M3 ? 0x7Eu : 0x7Bu);
  const int32_t ef = (int32_t)(a >> 23) - 127, emin = 1 - (int32_t)bias;
  if (ef >= emin) {  // normal: round the f32 mantissa to M bits; a carry bumps the exponent
    const uint32_t sh = 23u - M;
    const uint32_t r = (a + ((1u << (sh - 1)) - 1u) + ((a >> sh) & 1u)) >> sh;
    return s | (r - ((127u - bias) << M));
  }
  // Subnormal (or zero): code = |f| / 2^(emin - M), rounded to nearest even.
  const int32_t sh = 23 + emin - (int32_t)M - ef;
  if (ef < -126 || sh > 25) return s;   // below a quarter of the smallest subnormal
  const uint32_t m24 = (a & 0x7FFFFFu) | 0x800000u;
  uint32_t q = m24 >> sh;
  const uint32_t rem = m24 & ((1u << sh) - 1u), half = 1u << (sh - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return s | q;
}

// FP8 bits -> f32, exact.
GAACRT_HD float gaac_fp8_to_f32(int32_t k, uint32_t b) {
  const uint32_t M = (uint32_t)gaac_fp8_mbits(k), E = (uint32_t)gaac_fp8_ebits(k), bias = (1u << (E - 1)) - 1u;
  const uint32_t s = (b & 0x80u) << 24, e = (b >> M) & ((1u << E) - 1u), m = b & ((1u << M) - 1u);
  if (k == GAAC_FP8_E4M3 && (b & 0x7Fu) == 0x7Fu) return bits_to_f32(s | 0x7FC00000u);
  if (k == GAAC_FP8_E5M2 && e == 31u) return bits_to_f32(s | 0x7F800000u | (m ? 0x400000u | (m << 21) : 0u));
  if (e == 0) {  // m * 2^(1 - bias - M), a power of two times a small integer: exact in f32
    const float v = (float)m * bits_to_f32((127u + 1u - bias - M) << 23);
    return bits_to_f32(s | f32_to_bits(v));
  }
  return bits_to_f32(s | ((e - bias + 127u) << 23) | (m << (23u - M)));
}

// ---- word-level decode of one group -------------------------------------------------------------
// Bit 0 of each byte of a spread: bit m of x -> byte lane m, then shifted to bit p.
GAACRT_HD GaacU32x2 gaac_spread_bits(uint32_t x, uint32_t p) {
  GaacU32x2 r;
  r.lo = (((x & 15u) * 0x00204081u) & 0x01010101u) << p;
  r.hi = ((((x >> 4) & 15u) * 0x00204081u) & 0x01010101u) << p;
  return r;
}

// The sm values of group j of a lane in byte lanes. E4M3: w = the group's nibble word. E5M2: the
// lane's sm set (a, b, c) for j / 4 and gamma = j % 4, unpacked like BF16 3-bit codes.
GAACRT_HD GaacU32x2 gaac_fp8_sm_e4m3(uint32_t w) {
  GaacU32x2 r;
  r.lo = w & 0x0F0F0F0Fu;
  r.hi = (w >> 4) & 0x0F0F0F0Fu;
  return r;
}
// 2-bit codes of group j from the lane's code word j / 2.
GAACRT_HD GaacU32x2 gaac_fp8_group_codes(uint32_t w, int32_t j) {
  const uint32_t sh = 4u * (uint32_t)(j & 1);
  GaacU32x2 r;
  r.lo = (w >> sh) & 0x03030303u;
  r.hi = (w >> (sh + 2u)) & 0x03030303u;
  return r;
}
// Exponents: base(tag) + low 2 bits + X (bit 2) + R bytes (bits 3, 4). Branch-free contract as in
// gaac_group_exponents: x = 0 for tag 0, r = 0 unless raw. Bases must be <= 255 - 31 - ... only the
// encoder's choice matters: it picks a mode only when base + code = e fits the field.
GAACRT_HD GaacU32x2 gaac_fp8_group_exponents(uint32_t tag, GaacU32x2 b2, GaacU32x2 b3, GaacU32x2 low2, uint32_t x,
                                             uint32_t r) {
  const GaacU32x2 sx = gaac_spread_bits(x, 2), r3 = gaac_spread_bits(r & 0xFFu, 3), r4 = gaac_spread_bits(r >> 8, 4);
  const uint32_t base_lo = tag == GAAC_TAG_3BIT ? b2.lo : (tag == GAAC_TAG_4BIT ? b3.lo : 0u);
  const uint32_t base_hi = tag == GAAC_TAG_3BIT ? b2.hi : (tag == GAAC_TAG_4BIT ? b3.hi : 0u);
  GaacU32x2 e;
  e.lo = base_lo + (low2.lo | sx.lo | r3.lo | r4.lo);
  e.hi = base_hi + (low2.hi | sx.hi | r3.hi | r4.hi);
  return e;
}
// Four FP8 bytes from 4 sm values and 4 exponents (byte lanes): s << 7 | e << M | m.
GAACRT_HD uint32_t gaac_fp8_bytes4(int32_t k, uint32_t sm, uint32_t e) {
  return k == GAAC_FP8_E4M3 ? ((sm << 4) & 0x80808080u) | (e << 3) | (sm & 0x07070707u)
                            : ((sm << 5) & 0x80808080u) | (e << 2) | (sm & 0x03030303u);
}

// ---- reference tile routines (one thread) -------------------------------------------------------
GAACRT_HD GaacModeCounts gaac_fp8_tile_modes(int32_t k, const GAACRT_DEVICE uint8_t* slot, int32_t d) {
  return gaac_tag_counts(slot + gaac_fp8_tags_offset(k, d), d);
}
GAACRT_HD GaacCheck gaac_fp8_validate(int32_t k, const GAACRT_DEVICE uint8_t* slot, uint32_t avail, int32_t d,
                                      uint32_t capacity, int32_t expected_escape) {
  return gaac_validate_tags(slot, avail, d, gaac_tile_dim_ok(d) ? gaac_fp8_fixed_bytes(k, d) : 0u, gaac_fp8_r_bytes(k),
                            capacity, expected_escape);
}

// Encodes FP8 bits [16][d] (row stride `stride`) with bases b2[d], b3[d] (mode 0 and mode 1).
// Returns the escape bytes used, GAAC_DOES_NOT_FIT (nothing written) or GAAC_BAD_TILE_DIM.
GAACRT_HD int32_t gaac_fp8_encode_tile(int32_t k, const GAACRT_DEVICE uint8_t* fp8, int32_t stride, int32_t d,
                                       const GAACRT_DEVICE uint8_t* b2, const GAACRT_DEVICE uint8_t* b3,
                                       uint32_t capacity, GAACRT_DEVICE uint8_t* slot) {
  if (!gaac_tile_dim_ok(d)) return GAAC_BAD_TILE_DIM;
  const int32_t nl = gaac_lanes(d), G = gaac_group_cols(d);
  const uint32_t M = (uint32_t)gaac_fp8_mbits(k), emask = (1u << gaac_fp8_ebits(k)) - 1u, rb = gaac_fp8_r_bytes(k);
  uint32_t tags[GAAC_MAX_LANES];
  uint32_t n_x = 0, n_raw = 0;
  for (int32_t pass = 0; pass < 2; ++pass) {
    GAACRT_DEVICE uint8_t* esc = slot + gaac_fp8_fixed_bytes(k, d);
    uint32_t xo = 0, ro = n_x;
    for (int32_t l = 0; l < nl; ++l) {
      const int32_t h = l >= G ? 1 : 0, g = l - h * G;
      uint32_t smw[8] = {0, 0, 0, 0, 0, 0, 0, 0}, cw[4] = {0, 0, 0, 0};
      if (pass == 0) tags[l] = 0;
      for (int32_t j = 0; j < GAAC_LANE_GROUPS; ++j) {
        const GAACRT_DEVICE uint8_t* v = fp8 + (4 * (j >> 1) + 2 * h + (j & 1)) * stride + 8 * g;
        uint32_t e[GAAC_GROUP];
        bool ok2 = true, ok3 = true;
        for (int32_t m = 0; m < GAAC_GROUP; ++m) {
          e[m] = ((uint32_t)v[m] >> M) & emask;
          ok2 = ok2 && (e[m] - (uint32_t)b2[8 * g + m]) <= 3u;
          ok3 = ok3 && (e[m] - (uint32_t)b3[8 * g + m]) <= 7u;
        }
        if (pass == 0) {
          const uint32_t tag = ok2 ? GAAC_TAG_3BIT : (ok3 ? GAAC_TAG_4BIT : GAAC_TAG_RAW);
          tags[l] |= tag << (2 * j);
          n_x += tag != GAAC_TAG_3BIT;
          n_raw += tag == GAAC_TAG_RAW;
          continue;
        }
        const uint32_t tag = (tags[l] >> (2 * j)) & 3u;
        uint32_t x = 0, r = 0;
        GaacU32x2 sm = {0, 0}, c2 = {0, 0};
        for (int32_t m = 0; m < GAAC_GROUP; ++m) {
          const uint32_t code = e[m] - (tag == GAAC_TAG_3BIT ? (uint32_t)b2[8 * g + m]
                                                             : (tag == GAAC_TAG_4BIT ? (uint32_t)b3[8 * g + m] : 0u));
          const uint32_t smv = (((uint32_t)v[m] >> 7) << M) | ((uint32_t)v[m] & ((1u << M) - 1u));
          (m < 4 ? sm.lo : sm.hi) |= smv << (8 * (m & 3));
          (m < 4 ? c2.lo : c2.hi) |= (code & 3u) << (8 * (m & 3));
          x |= ((code >> 2) & 1u) << m;
          r |= ((code >> 3) & 1u) << m;
          r |= ((code >> 4) & 1u) << (8 + m);
        }
        if (k == GAAC_FP8_E4M3) smw[j] = sm.lo | (sm.hi << 4);
        else gaac_put_group_codes(smw + 3 * (j >> 2), j & 3, sm);
        cw[j >> 1] |= (c2.lo | (c2.hi << 2)) << (4 * (j & 1));
        if (tag != GAAC_TAG_3BIT) esc[xo++] = (uint8_t)x;
        if (tag == GAAC_TAG_RAW) {
          for (uint32_t p = 0; p < rb; ++p) esc[ro + p] = (uint8_t)(r >> (8 * p));
          ro += rb;
        }
      }
      if (pass == 0) continue;
      if (k == GAAC_FP8_E4M3) {
        for (int32_t j = 0; j < GAAC_LANE_GROUPS; ++j) gaac_st32(slot + 16u * (uint32_t)((j >> 2) * nl + l) + 4u * (uint32_t)(j & 3), smw[j]);
      } else {
        for (int32_t w = 0; w < 6; ++w) gaac_st32(slot + gaac_code_word_offset(d, l, w) - gaac_codes_a_offset(d), smw[w]);
      }
      for (int32_t w = 0; w < 4; ++w) gaac_st32(slot + gaac_fp8_codes_offset(k, d) + 16u * (uint32_t)l + 4u * (uint32_t)w, cw[w]);
      slot[gaac_fp8_tags_offset(k, d) + 2 * l] = (uint8_t)tags[l];
      slot[gaac_fp8_tags_offset(k, d) + 2 * l + 1] = (uint8_t)(tags[l] >> 8);
    }
    if (pass == 0 && n_x + rb * n_raw > capacity) return GAAC_DOES_NOT_FIT;
  }
  return (int32_t)(n_x + rb * n_raw);
}

// Decodes token rows selected by `want` into FP8 bits out[t * stride + c] (stride 0 with one
// row: that row at out). Validates first, like gaac_decode_rows; never reads past fixed + capacity.
GAACRT_HD GaacCheck gaac_fp8_decode_rows(int32_t k, const GAACRT_DEVICE uint8_t* slot, int32_t d, uint32_t capacity,
                                         const GAACRT_DEVICE uint8_t* b2, const GAACRT_DEVICE uint8_t* b3, uint32_t want,
                                         GAACRT_DEVICE uint8_t* out, int32_t stride) {
  const GaacCheck chk = gaac_fp8_validate(k, slot, gaac_tile_dim_ok(d) ? gaac_fp8_fixed_bytes(k, d) + capacity : 0u,
                                          d, capacity, -1);
  if (chk.status != GAAC_OK) return chk;
  const int32_t nl = gaac_lanes(d), G = gaac_group_cols(d);
  const uint32_t rb = gaac_fp8_r_bytes(k);
  const GAACRT_DEVICE uint8_t* tags = slot + gaac_fp8_tags_offset(k, d);
  const GAACRT_DEVICE uint8_t* esc = slot + gaac_fp8_fixed_bytes(k, d);
  uint32_t xo = 0, ro = 0;
  for (int32_t l = 0; l < nl; ++l) ro += gaac_popc(gaac_tag_masks(gaac_tag_word(tags, l)).x);
  for (int32_t l = 0; l < nl; ++l) {
    const int32_t h = l >= G ? 1 : 0, g = l - h * G;
    const uint32_t t16 = gaac_tag_word(tags, l);
    const GaacU32x2 w2 = {gaac_ld32(b2 + 8 * g), gaac_ld32(b2 + 8 * g + 4)};
    const GaacU32x2 w3 = {gaac_ld32(b3 + 8 * g), gaac_ld32(b3 + 8 * g + 4)};
    for (int32_t j = 0; j < GAAC_LANE_GROUPS; ++j) {
      const uint32_t tag = (t16 >> (2 * j)) & 3u;
      const int32_t t = 4 * (j >> 1) + 2 * h + (j & 1);
      uint32_t x = 0, r = 0;
      if (tag != GAAC_TAG_3BIT) x = esc[xo++];
      if (tag == GAAC_TAG_RAW) {
        for (uint32_t p = 0; p < rb; ++p) r |= (uint32_t)esc[ro + p] << (8 * p);
        ro += rb;
      }
      if (!((want >> t) & 1u)) continue;
      GaacU32x2 sm;
      if (k == GAAC_FP8_E4M3) {
        sm = gaac_fp8_sm_e4m3(gaac_ld32(slot + 16u * (uint32_t)((j >> 2) * nl + l) + 4u * (uint32_t)(j & 3)));
      } else {
        const int32_t s = 3 * (j >> 2);
        const uint32_t o = gaac_codes_a_offset(d);  // the sm plane reuses the BF16 code-word offsets, from 0
        sm = gaac_group_codes(gaac_ld32(slot + gaac_code_word_offset(d, l, s) - o),
                              gaac_ld32(slot + gaac_code_word_offset(d, l, s + 1) - o),
                              gaac_ld32(slot + gaac_code_word_offset(d, l, s + 2) - o), j & 3);
      }
      const GaacU32x2 low2 =
          gaac_fp8_group_codes(gaac_ld32(slot + gaac_fp8_codes_offset(k, d) + 16u * (uint32_t)l + 4u * (uint32_t)(j >> 1)), j);
      const GaacU32x2 e = gaac_fp8_group_exponents(tag, w2, w3, low2, x, r);
      const uint32_t lo = gaac_fp8_bytes4(k, sm.lo, e.lo), hi = gaac_fp8_bytes4(k, sm.hi, e.hi);
      gaac_st32(out + t * stride + 8 * g, lo);
      gaac_st32(out + t * stride + 8 * g + 4, hi);
    }
  }
  return chk;
}

}  // namespace gaacrt
