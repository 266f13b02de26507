// vec_dot_neon.cpp — aarch64 NEON vec_dot kernels (built only for aarch64, where NEON is baseline).
// Same integers as vec_dot_scalar.cpp, 16 bytes at a time; shared/spec/gguf.md §2.9.
//
// Every kernel turns weights into signed bytes and calls dot_s8(), a 16-wide int8 dot product:
// one vdotq_s32 when the compiler targets the dotprod extension (Apple M1+, Neoverse N1+, and
// any -march=armv8.2-a+dotprod build), else vmull_s8 + vpadalq_s16 (int16 products, pairwise
// widened into int32), which every ARMv8 core has. Either way only the 4-lane total is used, so
// the two forms give the same integers. Block scales are applied as in vec_dot_avx2.cpp: four
// float lanes per 32-element block (FMA), one exact int32 per K-quant super-block.
#include <arm_neon.h>

#include <cstring>

#include "quant/blocks.h"
#include "vec_dot.h"
#include "vec_dot_util.h"

namespace gaacrt::cpu {
namespace {

inline float fp16(uint16_t h) {  // aarch64 converts __fp16 natively and exactly
  __fp16 f;
  std::memcpy(&f, &h, 2);
  return static_cast<float>(f);
}

inline int32x4_t dot_s8(int32x4_t acc, int8x16_t w, int8x16_t a) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, w, a);
#else
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(a)));
  return vpadalq_s16(acc, vmull_high_s8(w, a));
#endif
}

// 16 bytes of packed nibbles -> elements 0..15 (low nibbles) and 16..31 (high), as s8 0..15.
struct Nibbles { int8x16_t lo, hi; };
inline Nibbles unpack_nibbles(const uint8_t* qs) {
  const uint8x16_t q = vld1q_u8(qs);
  return {vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), vreinterpretq_s8_u8(vshrq_n_u8(q, 4))};
}

// Q5: bit j of the u32 qh -> 0x10 in byte j (j = 0..31), as two 16-byte halves.
inline Nibbles fifth_bits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const uint8x16_t bit = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t b0 = vcombine_u8(vdup_n_u8(qh & 0xFF), vdup_n_u8((qh >> 8) & 0xFF));
  const uint8x16_t b1 = vcombine_u8(vdup_n_u8((qh >> 16) & 0xFF), vdup_n_u8(qh >> 24));
  const uint8x16_t x10 = vdupq_n_u8(0x10);
  return {vreinterpretq_s8_u8(vandq_u8(vtstq_u8(b0, bit), x10)),
          vreinterpretq_s8_u8(vandq_u8(vtstq_u8(b1, bit), x10))};
}

// ---- 32-element blocks --------------------------------------------------------------------------

// Σ over blocks of d_block * Σ qw*qa; block_ints(w, a) returns the block's int32 lanes and
// block_extra the Q4_1/Q5_1 m*s term.
template <typename WB, typename AB, typename Ints>
float dot_blocks32(int64_t n, const void* vw, const void* va, Ints block_ints) {
  const WB* w = static_cast<const WB*>(vw);
  const AB* a = static_cast<const AB*>(va);
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
  float extra = 0.0f;
  const int64_t nb = n / 32;
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(block_ints(w[i], a[i], extra)), fp16(w[i].d) * fp16(a[i].d));
    acc1 = vfmaq_n_f32(acc1, vcvtq_f32_s32(block_ints(w[i + 1], a[i + 1], extra)), fp16(w[i + 1].d) * fp16(a[i + 1].d));
  }
  if (i < nb) acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(block_ints(w[i], a[i], extra)), fp16(w[i].d) * fp16(a[i].d));
  return vaddvq_f32(vaddq_f32(acc0, acc1)) + extra;
}

inline int32x4_t dot32(int8x16_t lo, int8x16_t hi, const int8_t* qa) {
  return dot_s8(dot_s8(vdupq_n_s32(0), lo, vld1q_s8(qa)), hi, vld1q_s8(qa + 16));
}

float dot_q4_0(int64_t n, const void* w, const void* a) {
  return dot_blocks32<block_q4_0, block_q8_0>(n, w, a, [](const block_q4_0& bw, const block_q8_0& ba, float&) {
    const Nibbles q = unpack_nibbles(bw.qs);
    const int8x16_t eight = vdupq_n_s8(8);
    return dot32(vsubq_s8(q.lo, eight), vsubq_s8(q.hi, eight), ba.qs);
  });
}

float dot_q4_1(int64_t n, const void* w, const void* a) {
  return dot_blocks32<block_q4_1, block_q8_1>(n, w, a, [](const block_q4_1& bw, const block_q8_1& ba, float& extra) {
    extra += fp16(bw.m) * fp16(ba.s);
    const Nibbles q = unpack_nibbles(bw.qs);
    return dot32(q.lo, q.hi, ba.qs);
  });
}

float dot_q5_0(int64_t n, const void* w, const void* a) {
  return dot_blocks32<block_q5_0, block_q8_0>(n, w, a, [](const block_q5_0& bw, const block_q8_0& ba, float&) {
    const Nibbles q = unpack_nibbles(bw.qs), h = fifth_bits(bw.qh);
    const int8x16_t sixteen = vdupq_n_s8(16);
    return dot32(vsubq_s8(vorrq_s8(q.lo, h.lo), sixteen), vsubq_s8(vorrq_s8(q.hi, h.hi), sixteen), ba.qs);
  });
}

float dot_q5_1(int64_t n, const void* w, const void* a) {
  return dot_blocks32<block_q5_1, block_q8_1>(n, w, a, [](const block_q5_1& bw, const block_q8_1& ba, float& extra) {
    extra += fp16(bw.m) * fp16(ba.s);
    const Nibbles q = unpack_nibbles(bw.qs), h = fifth_bits(bw.qh);
    return dot32(vorrq_s8(q.lo, h.lo), vorrq_s8(q.hi, h.hi), ba.qs);
  });
}

float dot_q8_0(int64_t n, const void* w, const void* a) {
  return dot_blocks32<block_q8_0, block_q8_0>(n, w, a, [](const block_q8_0& bw, const block_q8_0& ba, float&) {
    return dot32(vld1q_s8(bw.qs), vld1q_s8(bw.qs + 16), ba.qs);
  });
}

float dot_iq4_nl(int64_t n, const void* w, const void* a) {
  return dot_blocks32<block_iq4_nl, block_q8_0>(n, w, a, [](const block_iq4_nl& bw, const block_q8_0& ba, float&) {
    const int8x16_t table = vld1q_s8(kIQ4NLTable);
    const Nibbles q = unpack_nibbles(bw.qs);
    return dot32(vqtbl1q_s8(table, vreinterpretq_u8_s8(q.lo)), vqtbl1q_s8(table, vreinterpretq_u8_s8(q.hi)), ba.qs);
  });
}

// ---- K-quants ------------------------------------------------------------------------------------

template <bool kFifthBit, typename Block>
float dot_q45_k(int64_t n, const void* vw, const void* va) {
  const Block* w = static_cast<const Block*>(vw);
  const block_q8_k* a = static_cast<const block_q8_k*>(va);
  const uint8x16_t m4 = vdupq_n_u8(0x0F), m1 = vdupq_n_u8(0x01);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    uint8_t sc[8], mn[8];
    unpack_q4k_scales(w[i].scales, sc, mn);
    int summ = 0;
    for (int j = 0; j < 8; ++j) summ += mn[j] * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
    uint8x16_t h0 = m1, h1 = m1;  // unused for Q4_K
    if constexpr (kFifthBit) { h0 = vld1q_u8(w[i].qh); h1 = vld1q_u8(w[i].qh + 16); }
    int32x4_t acc = vdupq_n_s32(0);
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
      const int8_t* qa = a[i].qs + 64 * c;
      const int32x4_t dlo = dot32(vreinterpretq_s8_u8(lo0), vreinterpretq_s8_u8(lo1), qa);
      const int32x4_t dhi = dot32(vreinterpretq_s8_u8(hi0), vreinterpretq_s8_u8(hi1), qa + 32);
      acc = vmlaq_n_s32(vmlaq_n_s32(acc, dlo, sc[2 * c]), dhi, sc[2 * c + 1]);
    }
    const float d = fp16(w[i].d) * a[i].d, dmin = fp16(w[i].dmin) * a[i].d;
    sum += d * static_cast<float>(vaddvq_s32(acc)) - dmin * static_cast<float>(summ);
  }
  return sum;
}

float dot_q6_k(int64_t n, const void* vw, const void* va) {
  const block_q6_k* w = static_cast<const block_q6_k*>(vw);
  const block_q8_k* a = static_cast<const block_q8_k*>(va);
  const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03), m30 = vdupq_n_u8(0x30);
  const int8x16_t k32 = vdupq_n_s8(32);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int32x4_t acc = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* L = w[i].ql + 64 * h;
      const uint8_t* H = w[i].qh + 32 * h;
      const int8_t* qa = a[i].qs + 128 * h;
      const int8_t* s = w[i].scales + 8 * h;
      for (int k = 0; k < 2; ++k) {  // 16 elements per vector = exactly one 16-element sub-block
        const uint8x16_t l0 = vld1q_u8(L + 16 * k), l1 = vld1q_u8(L + 32 + 16 * k), hh = vld1q_u8(H + 16 * k);
        const uint8x16_t q[4] = {
            vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hh, m3), 4)),
            vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hh, 2), m3), 4)),
            vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(hh, m30)),
            vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(hh, 2), m30)),
        };
        for (int g = 0; g < 4; ++g) {  // group g, elements 32g + 16k ..: scale index 2g + k
          const int8x16_t qs = vsubq_s8(vreinterpretq_s8_u8(q[g]), k32);
          acc = vmlaq_n_s32(acc, dot_s8(vdupq_n_s32(0), qs, vld1q_s8(qa + 32 * g + 16 * k)), s[2 * g + k]);
        }
      }
    }
    sum += (fp16(w[i].d) * a[i].d) * static_cast<float>(vaddvq_s32(acc));
  }
  return sum;
}

float dot_iq4_xs(int64_t n, const void* vw, const void* va) {
  const block_iq4_xs* w = static_cast<const block_iq4_xs*>(vw);
  const block_q8_k* a = static_cast<const block_q8_k*>(va);
  const int8x16_t table = vld1q_s8(kIQ4NLTable);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int ls[8];
    unpack_iq4xs_scales(w[i], ls);
    int32x4_t acc = vdupq_n_s32(0);
    for (int ib = 0; ib < 8; ++ib) {
      const Nibbles q = unpack_nibbles(w[i].qs + 16 * ib);
      const int32x4_t d = dot32(vqtbl1q_s8(table, vreinterpretq_u8_s8(q.lo)),
                                vqtbl1q_s8(table, vreinterpretq_u8_s8(q.hi)), a[i].qs + 32 * ib);
      acc = vmlaq_n_s32(acc, d, ls[ib]);
    }
    sum += (fp16(w[i].d) * a[i].d) * static_cast<float>(vaddvq_s32(acc));
  }
  return sum;
}

// ---- float weights ------------------------------------------------------------------------------

inline float32x4_t load4_f32(const void* w, int64_t i) { return vld1q_f32(static_cast<const float*>(w) + i); }
inline float32x4_t load4_f16(const void* w, int64_t i) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(static_cast<const uint16_t*>(w) + i)));
}
inline float32x4_t load4_bf16(const void* w, int64_t i) {  // bf16 is the top half of an fp32
  return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(static_cast<const uint16_t*>(w) + i), 16));
}
inline float load1_f32(const void* w, int64_t i) { return static_cast<const float*>(w)[i]; }
inline float load1_f16(const void* w, int64_t i) { return fp16(static_cast<const uint16_t*>(w)[i]); }
inline float load1_bf16(const void* w, int64_t i) {
  const uint32_t u = static_cast<uint32_t>(static_cast<const uint16_t*>(w)[i]) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <float32x4_t (*Load4)(const void*, int64_t), float (*Load1)(const void*, int64_t)>
float dot_float(int64_t n, const void* w, const void* va) {
  const float* a = static_cast<const float*>(va);
  float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 4; ++k) acc[k] = vfmaq_f32(acc[k], Load4(w, i + 4 * k), vld1q_f32(a + i + 4 * k));
  for (; i + 4 <= n; i += 4) acc[0] = vfmaq_f32(acc[0], Load4(w, i), vld1q_f32(a + i));
  float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
  for (; i < n; ++i) sum += Load1(w, i) * a[i];
  return sum;
}

}  // namespace

VecDotFn vec_dot_neon(GGMLType w) {
  switch (w) {
    case GGMLType::F32: return &dot_float<load4_f32, load1_f32>;
    case GGMLType::F16: return &dot_float<load4_f16, load1_f16>;
    case GGMLType::BF16: return &dot_float<load4_bf16, load1_bf16>;
    case GGMLType::Q4_0: return &dot_q4_0;
    case GGMLType::Q4_1: return &dot_q4_1;
    case GGMLType::Q5_0: return &dot_q5_0;
    case GGMLType::Q5_1: return &dot_q5_1;
    case GGMLType::Q8_0: return &dot_q8_0;
    case GGMLType::IQ4_NL: return &dot_iq4_nl;
    case GGMLType::Q4_K: return &dot_q45_k<false, block_q4_k>;
    case GGMLType::Q5_K: return &dot_q45_k<true, block_q5_k>;
    case GGMLType::Q6_K: return &dot_q6_k;
    case GGMLType::IQ4_XS: return &dot_iq4_xs;
    default: return nullptr;
  }
}

}  // namespace gaacrt::cpu
