// asym2.h — 2-bit asymmetric (min/max) quantization and the two tile layouts built on it: the
// per-token value tile shared by E8 k2v2 and KIVI-2 ("v2"), and KIVI-2's per-channel key tile
// (portable: C++, CUDA and MSL include this file).
//
// Quantizer (shared/spec/e8.md §8, KIVI): over a group of values,
//   z = fp16(min),  D = fp16((max - min) / 3)        both rounded to fp16 BEFORE use,
//   q = clamp(round((v - z) / D), 0, 3),             round = to nearest, ties to even (numpy's)
//   v^ = z + D * q                                   (fp32: one multiply, one add, no FMA)
// fp16 rounding saturates at +-65504 (a group beyond the fp16 range keeps finite parameters);
// D = 0 (a constant group, or a range below the fp16 resolution) gives q = 0 everywhere.
// The tie rule is written as comparisons, (t > 0.5) + (t >= 1.5) + (t > 2.5), which is
// round-half-even on [0, 3] and clamps for free: no rint, identical on every backend.
//
// ---- v2 value tile: 16 tokens x T channels (T = tile_dim, a multiple of 32), groups of 32
//      channels of one token (spec §8, G = 32) -------------------------------------------------
//   offset  bytes      content
//   0       4T         codes: uint8 [16][T/4]; token t, channel c at byte t*T/4 + c/4,
//                      bits 2*(c%4) .. +1
//   4T      2T         params: uint16 [16][T/32][2] = {D fp16, z fp16} of token t, group g
//   total   6T         (768 B for T = 128: 48 B per token = d/4 + 4d/32, spec §8)
//
// ---- KIVI-2 key tile: per channel over the 16 tokens of the block --------------------------
//   offset  bytes      content
//   0       4T         codes: uint32 [T]; channel c's word holds token t at bits 2t .. 2t+1
//   4T      4T         params: uint16 [T][2] = {D fp16, z fp16} of channel c over the block
//   total   8T         (1024 B for T = 128: 64 B per token = 2 bits + 32 bits / 16 per channel)
// A key's score needs no per-element decode: q.k^_t = sum_c q_c z_c + sum_c (q_c D_c) q_ct.
#pragma once
#include "../../common/half.h"
#include "../../common/portable.h"

namespace gaacrt {

constexpr int32_t ASYM2_TOKENS = 16;       // tokens per tile (the cache's block)
constexpr int32_t ASYM2_VGROUP = 32;       // value channels per (token, group)

struct Asym2Params {
  uint16_t scale_bits, zero_bits;  // fp16 D and z as stored
  float scale, zero;               // the same values as fp32 (what every decoder uses)
};

// fp32 -> fp16 bits, saturating at +-65504 (NaN stays NaN).
GAACRT_HD uint16_t asym2_fp16_sat(float x) {
  if (x > 65504.0f) x = 65504.0f;
  if (x < -65504.0f) x = -65504.0f;
  return f32_to_fp16(x);
}

GAACRT_HD Asym2Params asym2_params(float mn, float mx) {
  Asym2Params p;
  p.zero_bits = asym2_fp16_sat(mn);
  p.scale_bits = asym2_fp16_sat((mx - mn) / 3.0f);
  p.zero = fp16_to_f32(p.zero_bits);
  p.scale = fp16_to_f32(p.scale_bits);
  return p;
}

GAACRT_HD Asym2Params asym2_params_from_bits(uint16_t scale_bits, uint16_t zero_bits) {
  Asym2Params p;
  p.scale_bits = scale_bits;
  p.zero_bits = zero_bits;
  p.scale = fp16_to_f32(scale_bits);
  p.zero = fp16_to_f32(zero_bits);
  return p;
}

GAACRT_HD uint32_t asym2_code(float v, Asym2Params p) {
  if (!(p.scale > 0.0f)) return 0u;
  const float t = (v - p.zero) / p.scale;
  return (uint32_t)(t > 0.5f) + (uint32_t)(t >= 1.5f) + (uint32_t)(t > 2.5f);
}

GAACRT_HD float asym2_value(uint32_t q, Asym2Params p) { return p.zero + p.scale * (float)q; }

// ---- v2 value tile geometry ------------------------------------------------------------------
GAACRT_HD bool v2_tile_dim_ok(int32_t T) { return T >= ASYM2_VGROUP && T % ASYM2_VGROUP == 0; }
GAACRT_HD uint32_t v2_codes_offset(int32_t T, int32_t t) { return (uint32_t)t * (uint32_t)(T / 4); }
GAACRT_HD uint32_t v2_params_offset(int32_t T, int32_t t, int32_t g) {
  return 4u * (uint32_t)T + 4u * (uint32_t)(t * (T / ASYM2_VGROUP) + g);
}
GAACRT_HD uint32_t v2_slot_bytes(int32_t T) { return 6u * (uint32_t)T; }
GAACRT_STATIC_ASSERT(6 * 128 == 16 * (128 / 4 + 4 * 128 / 32), "v2 tile = 48 B per token at T = 128");

// Token t's parameters of group g, and the code of channel c, read from a slot.
GAACRT_HD Asym2Params v2_params(const GAACRT_DEVICE uint8_t* slot, int32_t T, int32_t t, int32_t g) {
  const GAACRT_DEVICE uint8_t* p = slot + v2_params_offset(T, t, g);
  return asym2_params_from_bits((uint16_t)(p[0] | (p[1] << 8)), (uint16_t)(p[2] | (p[3] << 8)));
}
GAACRT_HD uint32_t v2_code(const GAACRT_DEVICE uint8_t* slot, int32_t T, int32_t t, int32_t c) {
  return (slot[v2_codes_offset(T, t) + (uint32_t)(c >> 2)] >> (2 * (c & 3))) & 3u;
}

// Encodes token t's group g (its 32 values v) into a v2 slot: the fp16 D and z, and the group's 8
// code bytes, written whole (a group's codes never share a byte with another's). The one encoder
// of the CPU, CUDA and Metal backends, so their slots are byte-identical.
GAACRT_HD void v2_encode_group(const GAACRT_THREAD float* v, int32_t T, int32_t t, int32_t g,
                               GAACRT_DEVICE uint8_t* slot) {
  float mn = v[0], mx = v[0];
  for (int32_t i = 1; i < ASYM2_VGROUP; ++i) {
    mn = v[i] < mn ? v[i] : mn;
    mx = v[i] > mx ? v[i] : mx;
  }
  const Asym2Params p = asym2_params(mn, mx);
  GAACRT_DEVICE uint8_t* pp = slot + v2_params_offset(T, t, g);
  pp[0] = (uint8_t)p.scale_bits;
  pp[1] = (uint8_t)(p.scale_bits >> 8);
  pp[2] = (uint8_t)p.zero_bits;
  pp[3] = (uint8_t)(p.zero_bits >> 8);
  GAACRT_DEVICE uint8_t* codes = slot + v2_codes_offset(T, t) + (uint32_t)g * (ASYM2_VGROUP / 4);
  for (int32_t b = 0; b < ASYM2_VGROUP / 4; ++b) {
    uint32_t byte = 0;
    for (int32_t i = 0; i < 4; ++i) byte |= asym2_code(v[4 * b + i], p) << (2 * i);
    codes[b] = (uint8_t)byte;
  }
}

// ---- KIVI-2 key tile geometry -------------------------------------------------------------------
GAACRT_HD bool kivi2_k_tile_dim_ok(int32_t T) { return T >= 1 && T <= 1024; }
GAACRT_HD uint32_t kivi2_k_params_offset(int32_t T, int32_t c) { return 4u * (uint32_t)T + 4u * (uint32_t)c; }
GAACRT_HD uint32_t kivi2_k_slot_bytes(int32_t T) { return 8u * (uint32_t)T; }

GAACRT_HD uint32_t kivi2_k_word(const GAACRT_DEVICE uint8_t* slot, int32_t c) {
  const GAACRT_DEVICE uint8_t* p = slot + 4u * (uint32_t)c;
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
GAACRT_HD Asym2Params kivi2_k_params(const GAACRT_DEVICE uint8_t* slot, int32_t T, int32_t c) {
  const GAACRT_DEVICE uint8_t* p = slot + kivi2_k_params_offset(T, c);
  return asym2_params_from_bits((uint16_t)(p[0] | (p[1] << 8)), (uint16_t)(p[2] | (p[3] << 8)));
}

}  // namespace gaacrt
