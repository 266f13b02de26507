// vec_dot_q16_neon.cpp — aarch64 NEON dot products of quantized weights with Q16 activations
// (int16, one fp32 scale and sum per 32 values; quantize_act.h). Same integers as
// vec_dot_q16_scalar.cpp; shared/spec/gguf.md §2.9.
//
// vdotq is int8 only, so the products are int16 × int16 multiply-accumulates into int32 lanes
// (vmull_s16 / vmlal_s16 / vmlal_high_s16: 8 per 32 values, 8 products per lane). Weights become
// int16 on the way: vmovl for the 32-element types, and for the K-quants and IQ4_XS one widening
// multiply (vmull_u8 / vmull_s8) that applies the sub-block scale at the same time
// (|q·sc| <= 31·63 or 32·128 fits int16). A lane then holds at most 8·4096·32767 < 2^31, and
// becomes a float before any sum across lanes (which could overflow, see the scalar file).
#include <arm_neon.h>

#include <cstring>

#include "quant/blocks.h"
#include "quantize_act.h"
#include "vec_dot.h"
#include "vec_dot_util.h"

namespace gaacrt::cpu {
namespace {

inline float fp16(uint16_t h) {  // aarch64 converts __fp16 natively and exactly
  __fp16 f;
  std::memcpy(&f, &h, 2);
  return static_cast<float>(f);
}

// 32 int16 weights of one (sub-)block, elements 0-7, 8-15, 16-23, 24-31.
struct W16 {
  int16x8_t v[4];
};

inline W16 widen_s8(int8x16_t lo, int8x16_t hi) {  // elements 0..15 and 16..31 as s8
  return {{vmovl_s8(vget_low_s8(lo)), vmovl_high_s8(lo), vmovl_s8(vget_low_s8(hi)), vmovl_high_s8(hi)}};
}
inline W16 mul_u8(uint8x16_t lo, uint8x16_t hi, uint8_t sc) {  // u8 × scale, widened
  const uint8x8_t s = vdup_n_u8(sc);
  const uint8x16_t s16 = vdupq_n_u8(sc);
  return {{vreinterpretq_s16_u16(vmull_u8(vget_low_u8(lo), s)), vreinterpretq_s16_u16(vmull_high_u8(lo, s16)),
           vreinterpretq_s16_u16(vmull_u8(vget_low_u8(hi), s)), vreinterpretq_s16_u16(vmull_high_u8(hi, s16))}};
}
// s8 × scale, widened; the two halves may have their own scales (Q6_K's 16-element sub-blocks).
inline W16 mul_s8(int8x16_t lo, int8x16_t hi, int8_t sc_lo, int8_t sc_hi) {
  return {{vmull_s8(vget_low_s8(lo), vdup_n_s8(sc_lo)), vmull_high_s8(lo, vdupq_n_s8(sc_lo)),
           vmull_s8(vget_low_s8(hi), vdup_n_s8(sc_hi)), vmull_high_s8(hi, vdupq_n_s8(sc_hi))}};
}

// Σ w·a over the 32 values as 4 int32 lanes.
inline int32x4_t dot32(const W16& w, const int16_t* qa) {
  const int16x8_t a0 = vld1q_s16(qa), a1 = vld1q_s16(qa + 8), a2 = vld1q_s16(qa + 16), a3 = vld1q_s16(qa + 24);
  int32x4_t acc = vmull_s16(vget_low_s16(w.v[0]), vget_low_s16(a0));
  acc = vmlal_high_s16(acc, w.v[0], a0);
  acc = vmlal_s16(acc, vget_low_s16(w.v[1]), vget_low_s16(a1));
  acc = vmlal_high_s16(acc, w.v[1], a1);
  acc = vmlal_s16(acc, vget_low_s16(w.v[2]), vget_low_s16(a2));
  acc = vmlal_high_s16(acc, w.v[2], a2);
  acc = vmlal_s16(acc, vget_low_s16(w.v[3]), vget_low_s16(a3));
  return vmlal_high_s16(acc, w.v[3], a3);
}

// 16 bytes of packed nibbles -> elements 0..15 (low nibbles) and 16..31 (high), u8 0..15.
struct Nibbles { uint8x16_t lo, hi; };
inline Nibbles nibbles(const uint8_t* qs) {
  const uint8x16_t q = vld1q_u8(qs);
  return {vandq_u8(q, vdupq_n_u8(0x0F)), vshrq_n_u8(q, 4)};
}

// Q5: bit j of the u32 qh -> 0x10 in byte j (j = 0..31), as two 16-byte halves.
inline Nibbles fifth_bits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const uint8x16_t bit = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t b0 = vcombine_u8(vdup_n_u8(qh & 0xFF), vdup_n_u8((qh >> 8) & 0xFF));
  const uint8x16_t b1 = vcombine_u8(vdup_n_u8((qh >> 16) & 0xFF), vdup_n_u8(qh >> 24));
  const uint8x16_t x10 = vdupq_n_u8(0x10);
  return {vandq_u8(vtstq_u8(b0, bit), x10), vandq_u8(vtstq_u8(b1, bit), x10)};
}

inline int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

// ---- 32-element blocks: Ints(block) -> W16 (offset applied) -------------------------------------
inline W16 ints_q4_0(const block_q4_0& b) {
  const Nibbles q = nibbles(b.qs);
  return widen_s8(vsubq_s8(s8(q.lo), vdupq_n_s8(8)), vsubq_s8(s8(q.hi), vdupq_n_s8(8)));
}
inline W16 ints_q4_1(const block_q4_1& b) { const Nibbles q = nibbles(b.qs); return widen_s8(s8(q.lo), s8(q.hi)); }
inline W16 ints_q5_0(const block_q5_0& b) {
  const Nibbles q = nibbles(b.qs), h = fifth_bits(b.qh);
  return widen_s8(vsubq_s8(s8(vorrq_u8(q.lo, h.lo)), vdupq_n_s8(16)), vsubq_s8(s8(vorrq_u8(q.hi, h.hi)), vdupq_n_s8(16)));
}
inline W16 ints_q5_1(const block_q5_1& b) {
  const Nibbles q = nibbles(b.qs), h = fifth_bits(b.qh);
  return widen_s8(s8(vorrq_u8(q.lo, h.lo)), s8(vorrq_u8(q.hi, h.hi)));
}
inline W16 ints_q8_0(const block_q8_0& b) { return widen_s8(vld1q_s8(b.qs), vld1q_s8(b.qs + 16)); }
inline W16 ints_iq4_nl(const block_iq4_nl& b) {
  const int8x16_t table = vld1q_s8(kIQ4NLTable);
  const Nibbles q = nibbles(b.qs);
  return widen_s8(vqtbl1q_s8(table, q.lo), vqtbl1q_s8(table, q.hi));
}

inline float min_term(const block_q4_1& b, float sa) { return fp16(b.m) * sa; }
inline float min_term(const block_q5_1& b, float sa) { return fp16(b.m) * sa; }
template <typename Block>
inline float min_term(const Block&, float) { return 0.0f; }

template <typename Block, W16 (*Ints)(const Block&), bool kMin>
float dot_blocks32(int64_t n, const void* vw, const void* va) {
  const Block* w = static_cast<const Block*>(vw);
  const Q16Row a = q16_row(va, n);
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);  // even / odd blocks
  float extra = 0.0f;
  for (int64_t i = 0; i < n / 32; ++i) {
    const float32x4_t lanes = vcvtq_f32_s32(dot32(Ints(w[i]), a.q + 32 * i));
    const float scale = fp16(w[i].d) * a.d[i];
    if (i % 2 == 0) acc0 = vfmaq_n_f32(acc0, lanes, scale);
    else acc1 = vfmaq_n_f32(acc1, lanes, scale);
    if constexpr (kMin) extra += min_term(w[i], a.s[i]);
  }
  return vaddvq_f32(vaddq_f32(acc0, acc1)) + extra;
}

// ---- super-blocks: 8 sub-blocks of 32, each against its own activation scale -------------------

template <bool kFifthBit, typename Block>
float dot_q45_k(int64_t n, const void* vw, const void* va) {
  const Block* w = static_cast<const Block*>(vw);
  const Q16Row a = q16_row(va, n);
  const uint8x16_t m4 = vdupq_n_u8(0x0F), m1 = vdupq_n_u8(0x01);
  float32x4_t acc = vdupq_n_f32(0.0f);
  float mins = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    uint8_t sc[8], mn[8];
    unpack_q4k_scales(w[i].scales, sc, mn);
    float summ = 0.0f;
    for (int j = 0; j < 8; ++j) summ += static_cast<float>(mn[j]) * a.s[8 * i + j];
    mins += fp16(w[i].dmin) * summ;
    uint8x16_t h0 = m1, h1 = m1;  // unused for Q4_K
    if constexpr (kFifthBit) { h0 = vld1q_u8(w[i].qh); h1 = vld1q_u8(w[i].qh + 16); }
    float32x4_t fsb = vdupq_n_f32(0.0f);
    for (int c = 0; c < 4; ++c) {  // sub-block 2c: low nibbles of qs[32c..], 2c+1: high nibbles
      const uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * c), q1 = vld1q_u8(w[i].qs + 32 * c + 16);
      uint8x16_t lo0 = vandq_u8(q0, m4), lo1 = vandq_u8(q1, m4);
      uint8x16_t hi0 = vshrq_n_u8(q0, 4), hi1 = vshrq_n_u8(q1, 4);
      if constexpr (kFifthBit) {  // bit 2c of qh[l] -> bit 4 of the low value, bit 2c+1 -> high
        lo0 = vorrq_u8(lo0, vshlq_n_u8(vandq_u8(h0, m1), 4));
        lo1 = vorrq_u8(lo1, vshlq_n_u8(vandq_u8(h1, m1), 4));
        hi0 = vorrq_u8(hi0, vshlq_n_u8(vandq_u8(h0, vdupq_n_u8(2)), 3));
        hi1 = vorrq_u8(hi1, vshlq_n_u8(vandq_u8(h1, vdupq_n_u8(2)), 3));
        h0 = vshrq_n_u8(h0, 2);
        h1 = vshrq_n_u8(h1, 2);
      }
      const int16_t* qa = a.q + QK_K * i + 64 * c;
      fsb = vfmaq_n_f32(fsb, vcvtq_f32_s32(dot32(mul_u8(lo0, lo1, sc[2 * c]), qa)), a.d[8 * i + 2 * c]);
      fsb = vfmaq_n_f32(fsb, vcvtq_f32_s32(dot32(mul_u8(hi0, hi1, sc[2 * c + 1]), qa + 32)), a.d[8 * i + 2 * c + 1]);
    }
    acc = vfmaq_n_f32(acc, fsb, fp16(w[i].d));
  }
  return vaddvq_f32(acc) - mins;
}

float dot_q6_k(int64_t n, const void* vw, const void* va) {
  const block_q6_k* w = static_cast<const block_q6_k*>(vw);
  const Q16Row a = q16_row(va, n);
  const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03), m30 = vdupq_n_u8(0x30);
  const int8x16_t k32 = vdupq_n_s8(32);
  float32x4_t acc = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    float32x4_t fsb = vdupq_n_f32(0.0f);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* L = w[i].ql + 64 * h;
      const uint8_t* H = w[i].qh + 32 * h;
      const int8_t* s = w[i].scales + 8 * h;
      int8x16_t q[2][4];  // [k][g]: elements 32g + 16k .. +15 of this half, minus 32
      for (int k = 0; k < 2; ++k) {
        const uint8x16_t l0 = vld1q_u8(L + 16 * k), l1 = vld1q_u8(L + 32 + 16 * k), hh = vld1q_u8(H + 16 * k);
        q[k][0] = vsubq_s8(s8(vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hh, m3), 4))), k32);
        q[k][1] = vsubq_s8(s8(vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hh, 2), m3), 4))), k32);
        q[k][2] = vsubq_s8(s8(vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(hh, m30))), k32);
        q[k][3] = vsubq_s8(s8(vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(hh, 2), m30))), k32);
      }
      for (int g = 0; g < 4; ++g) {  // 32-element block 4h+g: its halves have scales 2g, 2g+1
        const W16 wv = mul_s8(q[0][g], q[1][g], s[2 * g], s[2 * g + 1]);
        fsb = vfmaq_n_f32(fsb, vcvtq_f32_s32(dot32(wv, a.q + QK_K * i + 128 * h + 32 * g)), a.d[8 * i + 4 * h + g]);
      }
    }
    acc = vfmaq_n_f32(acc, fsb, fp16(w[i].d));
  }
  return vaddvq_f32(acc);
}

float dot_iq4_xs(int64_t n, const void* vw, const void* va) {
  const block_iq4_xs* w = static_cast<const block_iq4_xs*>(vw);
  const Q16Row a = q16_row(va, n);
  const int8x16_t table = vld1q_s8(kIQ4NLTable);
  float32x4_t acc = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int ls[8];
    unpack_iq4xs_scales(w[i], ls);
    float32x4_t fsb = vdupq_n_f32(0.0f);
    for (int ib = 0; ib < 8; ++ib) {
      const Nibbles q = nibbles(w[i].qs + 16 * ib);
      const W16 wv = mul_s8(vqtbl1q_s8(table, q.lo), vqtbl1q_s8(table, q.hi), static_cast<int8_t>(ls[ib]),
                            static_cast<int8_t>(ls[ib]));
      fsb = vfmaq_n_f32(fsb, vcvtq_f32_s32(dot32(wv, a.q + QK_K * i + 32 * ib)), a.d[8 * i + ib]);
    }
    acc = vfmaq_n_f32(acc, fsb, fp16(w[i].d));
  }
  return vaddvq_f32(acc);
}

}  // namespace

VecDotFn vec_dot_q16_neon(GGMLType w) {
  switch (w) {
    case GGMLType::Q4_0: return &dot_blocks32<block_q4_0, ints_q4_0, false>;
    case GGMLType::Q4_1: return &dot_blocks32<block_q4_1, ints_q4_1, true>;
    case GGMLType::Q5_0: return &dot_blocks32<block_q5_0, ints_q5_0, false>;
    case GGMLType::Q5_1: return &dot_blocks32<block_q5_1, ints_q5_1, true>;
    case GGMLType::Q8_0: return &dot_blocks32<block_q8_0, ints_q8_0, false>;
    case GGMLType::IQ4_NL: return &dot_blocks32<block_iq4_nl, ints_iq4_nl, false>;
    case GGMLType::Q4_K: return &dot_q45_k<false, block_q4_k>;
    case GGMLType::Q5_K: return &dot_q45_k<true, block_q5_k>;
    case GGMLType::Q6_K: return &dot_q6_k;
    case GGMLType::IQ4_XS: return &dot_iq4_xs;
    default: return nullptr;
  }
}

}  // namespace gaacrt::cpu
