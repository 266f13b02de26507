// vec_dot_q16_avx2.h — AVX2 tile kernels of every quantized weight type against Q16 activations
// (int16, one fp32 scale and sum per 32 values; quantize_act.h), shared by two translation units:
// vec_dot_q16_avx2.cpp (products by _mm256_madd_epi16 + add) and vec_dot_q16_vnni_avx2.cpp (by
// AVX512-VNNI vpdpwssd, which also accumulates), chosen by the Dot template parameter.
//
// The integers are those of vec_dot_q16_scalar.cpp:
//   * every weight block is widened to int16 in element order (vpmovzxbw of the packed bytes,
//     then AND/shift for the nibbles), with its offset (-8, -16, -32) applied and, for the
//     K-quants and IQ4_XS, its sub-block scale multiplied in (|q·sc| <= 31·63 or 32·128: int16);
//   * madd multiplies int16 pairs into int32 lanes: a 32-value block leaves 8 lanes of 4 products
//     each, |lane| < 4·4096·32767 < 2^29, so no lane can overflow, and the lanes become floats
//     before any sum across them (which could: see vec_dot_q16_scalar.cpp);
//   * each 32-value block's lanes meet d_w·d_a (32-element types) or d_a (K-quant sub-blocks,
//     then d_w once per super-block) in one FMA into that output's float accumulator.
// Every (row, token) pair of a tile runs exactly the 1×1 kernel's operations in the same order,
// and vec_dot is the 1×1 tile, so prefill and decode agree bit for bit.
//
// Internal linkage throughout, as in vec_dot_blocks32_avx2.h: the two including files are built
// for different instruction sets.
#pragma once
#include "quantize_act.h"
#include "vec_dot_avx2.h"

namespace gaacrt::cpu::avx2 {
namespace {

// Two registers of int16: elements 0..15 and 16..31 of a 32-element (sub-)block.
struct W16 {
  __m256i lo, hi;
};

inline __m256i set16(int v) { return _mm256_set1_epi16(static_cast<int16_t>(v)); }

// 16 packed bytes -> their low nibbles (elements 0..15) and high nibbles (16..31) as int16.
inline W16 nibbles16(const uint8_t* qs) {
  const __m256i v = _mm256_cvtepu8_epi16(load128(qs));
  return {_mm256_and_si256(v, set16(0x0F)), _mm256_srli_epi16(v, 4)};
}

// 0xFFFF in int16 lane j where bit j of the 16-bit h is set.
inline __m256i bits16(uint32_t h) {
  const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
                                        static_cast<int16_t>(0x8000));
  return _mm256_cmpeq_epi16(_mm256_and_si256(set16(static_cast<int>(h & 0xFFFF)), bit), bit);
}

// ---- 32-element block types: how a weight block becomes 2 × 16 int16 --------------------------
// kMin: Q4_1/Q5_1, whose +m comes in as m_w · s_a.
struct Q4_0 { using WB = block_q4_0; static constexpr bool kMin = false;
  static W16 ints(const WB& b) { const W16 v = nibbles16(b.qs);
    return {_mm256_sub_epi16(v.lo, set16(8)), _mm256_sub_epi16(v.hi, set16(8))}; } };
struct Q4_1 { using WB = block_q4_1; static constexpr bool kMin = true;
  static W16 ints(const WB& b) { return nibbles16(b.qs); } };
// Q5: bit j of the u32 qh is the fifth bit of element j (spec §2.2). Q5_0's -16 in one step:
// n | (0x10 if set) - 16 = n - (0x10 if clear).
struct Q5_0 { using WB = block_q5_0; static constexpr bool kMin = false;
  static W16 ints(const WB& b) { uint32_t qh; std::memcpy(&qh, b.qh, 4); const W16 v = nibbles16(b.qs);
    return {_mm256_sub_epi16(v.lo, _mm256_andnot_si256(bits16(qh), set16(0x10))),
            _mm256_sub_epi16(v.hi, _mm256_andnot_si256(bits16(qh >> 16), set16(0x10)))}; } };
struct Q5_1 { using WB = block_q5_1; static constexpr bool kMin = true;
  static W16 ints(const WB& b) { uint32_t qh; std::memcpy(&qh, b.qh, 4); const W16 v = nibbles16(b.qs);
    return {_mm256_or_si256(v.lo, _mm256_and_si256(bits16(qh), set16(0x10))),
            _mm256_or_si256(v.hi, _mm256_and_si256(bits16(qh >> 16), set16(0x10)))}; } };
struct Q8_0 { using WB = block_q8_0; static constexpr bool kMin = false;
  static W16 ints(const WB& b) { return {_mm256_cvtepi8_epi16(load128(b.qs)), _mm256_cvtepi8_epi16(load128(b.qs + 16))}; } };
// IQ4_NL/IQ4_XS: the 16-entry grid looked up with a byte shuffle, then sign-extended.
inline W16 iq4_ints(const uint8_t* qs) {
  const __m128i t = load128(qs), m4 = _mm_set1_epi8(0x0F), table = load128(kIQ4NLTable);
  return {_mm256_cvtepi8_epi16(_mm_shuffle_epi8(table, _mm_and_si128(t, m4))),
          _mm256_cvtepi8_epi16(_mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(t, 4), m4)))};
}
struct IQ4_NL { using WB = block_iq4_nl; static constexpr bool kMin = false;
  static W16 ints(const WB& b) { return iq4_ints(b.qs); } };

// The Q16 row of token t of a tile.
inline Q16Row act_row(const uint8_t* a, size_t a_stride, int t, int64_t n) { return q16_row(a + t * a_stride, n); }

// Σ w·a over 32 int16 pairs as 8 int32 lanes.
template <class Dot>
inline __m256i lanes32(const W16& w, const int16_t* qa) {
  return Dot::dot2(w.lo, load256(qa), w.hi, load256(qa + 16));
}

template <class Dot, class P, int RM, int RN>
void tile32_q16(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride, float* out,
                int64_t out_stride) {
  static_assert(RN <= 4, "the min term keeps one token per lane of a 4-lane vector");
  using WB = typename P::WB;
  Q16Row act[RN];
  for (int t = 0; t < RN; ++t) act[t] = act_row(a, a_stride, t, n);
  __m256 acc[RM][RN];
  __m128 extra[RM];  // Q4_1/Q5_1: lane t = Σ m_w·s_a of token t, one FMA per block in block order
  for (int r = 0; r < RM; ++r) {
    extra[r] = _mm_setzero_ps();
    for (int t = 0; t < RN; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < n / 32; ++i) {
    W16 wq[RM];
    __m256 dw[RM];
    __m128 mw[RM];
    for (int r = 0; r < RM; ++r) {
      const WB& b = reinterpret_cast<const WB*>(w + r * w_stride)[i];
      wq[r] = P::ints(b);
      dw[r] = _mm256_set1_ps(fp16(b.d));
      if constexpr (P::kMin) mw[r] = _mm_set1_ps(fp16(b.m));
    }
    if constexpr (P::kMin) {  // (built in registers: a store + vector reload would stall forwarding)
      const auto s_of = [&](int t) { return t < RN ? act[t].s[i] : 0.0f; };
      const __m128 sa = RN == 1 ? _mm_set_ss(s_of(0)) : _mm_setr_ps(s_of(0), s_of(1), s_of(2), s_of(3));
      for (int r = 0; r < RM; ++r) extra[r] = _mm_fmadd_ps(mw[r], sa, extra[r]);
    }
    for (int t = 0; t < RN; ++t) {
      const int16_t* qa = act[t].q + 32 * i;
      const __m256i a0 = load256(qa), a1 = load256(qa + 16);
      const __m256 da = _mm256_broadcast_ss(act[t].d + i);
      for (int r = 0; r < RM; ++r) {
        const __m256i lanes = Dot::dot2(wq[r].lo, a0, wq[r].hi, a1);
        acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw[r], da), _mm256_cvtepi32_ps(lanes), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < RM; ++r) {
    alignas(16) float ex[4];  // once per row and call: a stall here does not matter
    _mm_store_ps(ex, extra[r]);
    for (int t = 0; t < RN; ++t) out[t * out_stride + r] = P::kMin ? hsum(acc[r][t]) + ex[t] : hsum(acc[r][t]);
  }
}

// ---- K-quants and IQ4_XS: 256-element super-blocks, eight 32-element activation blocks ---------

template <typename B>
inline const B& kblock(const uint8_t* base, size_t stride, int r, int64_t i) {
  return reinterpret_cast<const B*>(base + r * stride)[i];
}

// A super-block's weights, decoded two 32-element sub-blocks at a time with their scales
// multiplied in (so only 4 registers of weights are live while the tile's tokens pass): each
// policy is built from a block (scales unpacked once) and gives pair(c, s0, s1) = sub-blocks 2c
// and 2c+1; Q4_K/Q5_K (kMin) also give mins() = dmin·mn_j as 8 floats.
template <bool kFifth, typename Block>
struct Q45KDecoder {
  static constexpr bool kMin = true;
  const Block& b;
  __m256i sc, sm;  // sc0..7 in both lanes; sc0..7 | mn0..7
  explicit Q45KDecoder(const Block& blk) : b(blk) {
    sm = q4k_scales_mins(b.scales);
    sc = _mm256_permute2x128_si256(sm, sm, 0x00);
  }
  // qs[32c..32c+31]: low nibbles = sub-block 2c, high = 2c+1 (§2.4); Q5_K: bit 2c of qh[l] is the
  // fifth bit of the low value, bit 2c+1 of the high one (§2.5).
  void pair(int c, W16& s0, W16& s1) const {
    const __m256i m4 = set16(0x0F);
    const __m256i q0 = _mm256_cvtepu8_epi16(load128(b.qs + 32 * c)), q1 = _mm256_cvtepu8_epi16(load128(b.qs + 32 * c + 16));
    __m256i lo0 = _mm256_and_si256(q0, m4), lo1 = _mm256_and_si256(q1, m4);
    __m256i hi0 = _mm256_srli_epi16(q0, 4), hi1 = _mm256_srli_epi16(q1, 4);
    if constexpr (kFifth) {
      const __m256i h0 = _mm256_cvtepu8_epi16(load128(b.qh)), h1 = _mm256_cvtepu8_epi16(load128(b.qh + 16));
      const __m128i lo_shift = _mm_cvtsi32_si128(2 * c), hi_shift = _mm_cvtsi32_si128(2 * c + 1);
      const __m256i bit4 = set16(0x10);  // (h >> k) << 4 & 0x10 = bit k of h at bit 4
      lo0 = _mm256_or_si256(lo0, _mm256_and_si256(_mm256_slli_epi16(_mm256_srl_epi16(h0, lo_shift), 4), bit4));
      lo1 = _mm256_or_si256(lo1, _mm256_and_si256(_mm256_slli_epi16(_mm256_srl_epi16(h1, lo_shift), 4), bit4));
      hi0 = _mm256_or_si256(hi0, _mm256_and_si256(_mm256_slli_epi16(_mm256_srl_epi16(h0, hi_shift), 4), bit4));
      hi1 = _mm256_or_si256(hi1, _mm256_and_si256(_mm256_slli_epi16(_mm256_srl_epi16(h1, hi_shift), 4), bit4));
    }
    const __m256i c0 = splat16(sc, 2 * c), c1 = splat16(sc, 2 * c + 1);
    s0 = {_mm256_mullo_epi16(lo0, c0), _mm256_mullo_epi16(lo1, c0)};
    s1 = {_mm256_mullo_epi16(hi0, c1), _mm256_mullo_epi16(hi1, c1)};
  }
  __m256 mins() const {  // mn0..7 (high lane) as floats times dmin
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(sm, 1))),
                         _mm256_set1_ps(fp16(b.dmin)));
  }
};
struct Q4K : Q45KDecoder<false, block_q4_k> { using WB = block_q4_k; using Q45KDecoder::Q45KDecoder; };
struct Q5K : Q45KDecoder<true, block_q5_k> { using WB = block_q5_k; using Q45KDecoder::Q45KDecoder; };

// Q6_K: the 6-bit values are assembled 32 at a time in bytes (the 8-bit kernel's bit work, half
// the instructions of doing it in int16), minus 32 as signed bytes, then widened; each 16-element
// half of a 32-element block is one sub-block, its int8 scale splatted from the 16 loaded once.
struct Q6K {
  using WB = block_q6_k;
  static constexpr bool kMin = false;
  const WB& b;
  __m256i sc16;  // scales 0..7 | 8..15 as int16
  explicit Q6K(const WB& blk) : b(blk), sc16(_mm256_cvtepi8_epi16(load128(blk.scales))) {}
  // Sub-blocks 2c, 2c+1 = groups k = 2(c%2), 2(c%2)+1 of half h = c/2 (§2.6).
  void pair(int c, W16& s0, W16& s1) const {
    const int h = c / 2, k = 2 * (c % 2);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03), m30 = _mm256_set1_epi8(0x30);
    const __m256i l0 = load256(b.ql + 64 * h), l1 = load256(b.ql + 64 * h + 32), hh = load256(b.qh + 32 * h);
    __m256i g0, g1;  // groups k and k+1: elements 32k.., 32(k+1).. of this half (byte l = element l)
    if (k == 0) {
      g0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hh, m3), 4));
      g1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 2), m3), 4));
    } else {
      g0 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hh, m30));
      g1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(hh, 2), m30));
    }
    const __m256i sh = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
    s0 = widen_scaled(_mm256_sub_epi8(g0, _mm256_set1_epi8(32)), sh, k);
    s1 = widen_scaled(_mm256_sub_epi8(g1, _mm256_set1_epi8(32)), sh, k + 1);
  }
  // 32 signed bytes of group k -> int16 times scales 2k (first 16) and 2k+1 (last 16) of sh
  static W16 widen_scaled(__m256i q, __m256i sh, int k) {
    return {_mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)), splat16(sh, 2 * k)),
            _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)), splat16(sh, 2 * k + 1))};
  }
  __m256 mins() const { return _mm256_setzero_ps(); }
};

struct IQ4XS {
  using WB = block_iq4_xs;
  static constexpr bool kMin = false;
  const WB& b;
  int ls[8];
  explicit IQ4XS(const WB& blk) : b(blk) { unpack_iq4xs_scales(blk, ls); }
  void pair(int c, W16& s0, W16& s1) const {
    for (int k = 0; k < 2; ++k) {
      const int ib = 2 * c + k;
      const W16 v = iq4_ints(b.qs + 16 * ib);
      W16& dst = k == 0 ? s0 : s1;  // (assigning a braced list to a ?: lvalue is rejected by some compilers)
      dst = W16{_mm256_mullo_epi16(v.lo, set16(ls[ib])), _mm256_mullo_epi16(v.hi, set16(ls[ib]))};
    }
  }
  __m256 mins() const { return _mm256_setzero_ps(); }
};

// RM rows × RN tokens. For each super-block and pair: fsb = Σj cvt(lanes_j)·d_a_j (8 float lanes,
// j in order), then acc += d_w·fsb; the Q4_K/Q5_K min term Σj (dmin·mn_j)·s_a_j goes to macc.
template <class Dot, class P, int RM, int RN>
void tile_k_q16(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride, float* out,
                int64_t out_stride) {
  using WB = typename P::WB;
  Q16Row act[RN];
  for (int t = 0; t < RN; ++t) act[t] = act_row(a, a_stride, t, n);
  __m256 acc[RM][RN], macc[RM][RN];
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t) { acc[r][t] = _mm256_setzero_ps(); macc[r][t] = _mm256_setzero_ps(); }
  for (int64_t i = 0; i < n / QK_K; ++i) {
    for (int r = 0; r < RM; ++r) {
      const WB& b = kblock<WB>(w, w_stride, r, i);
      const P dec(b);
      __m256 fsb[RN];
      for (int t = 0; t < RN; ++t) fsb[t] = _mm256_setzero_ps();
      for (int c = 0; c < 4; ++c) {
        W16 s0, s1;
        dec.pair(c, s0, s1);
        for (int t = 0; t < RN; ++t) {
          const int16_t* qa = act[t].q + QK_K * i + 64 * c;
          const float* da = act[t].d + 8 * i + 2 * c;
          fsb[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes32<Dot>(s0, qa)), _mm256_broadcast_ss(da), fsb[t]);
          fsb[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes32<Dot>(s1, qa + 32)), _mm256_broadcast_ss(da + 1), fsb[t]);
        }
      }
      const __m256 dw = _mm256_set1_ps(fp16(b.d));
      for (int t = 0; t < RN; ++t) acc[r][t] = _mm256_fmadd_ps(dw, fsb[t], acc[r][t]);
      if constexpr (P::kMin) {
        const __m256 mins = dec.mins();
        for (int t = 0; t < RN; ++t) macc[r][t] = _mm256_fmadd_ps(mins, _mm256_loadu_ps(act[t].s + 8 * i), macc[r][t]);
      }
    }
  }
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t)
      out[t * out_stride + r] = P::kMin ? hsum(acc[r][t]) - hsum(macc[r][t]) : hsum(acc[r][t]);
}

// The prefill tile shapes: 2 rows × 4 tokens for the 32-element types (as the 8-bit kernels), and
// 1 × 4 for the super-block types (per row: 4 float sums per token, the min term, the weights).
constexpr int kQ16TileRows = 2, kQ16TileTokens = 4, kQ16TileRowsK = 1;

template <class P>
struct Tag {  // names a policy type without making one
  using type = P;
};

template <class Dot>
Kernels q16_kernel_table(GGMLType type) {
  auto k32 = [](auto tag) {
    using P = typename decltype(tag)::type;
    return Kernels{&dot_1x1<&tile32_q16<Dot, P, 1, 1>>, &tile32_q16<Dot, P, kQ16TileRows, kQ16TileTokens>,
                   kQ16TileRows, kQ16TileTokens};
  };
  auto kk = [](auto tag) {
    using P = typename decltype(tag)::type;
    return Kernels{&dot_1x1<&tile_k_q16<Dot, P, 1, 1>>, &tile_k_q16<Dot, P, kQ16TileRowsK, kQ16TileTokens>,
                   kQ16TileRowsK, kQ16TileTokens};
  };
  switch (type) {
    case GGMLType::Q4_0: return k32(Tag<Q4_0>{});
    case GGMLType::Q4_1: return k32(Tag<Q4_1>{});
    case GGMLType::Q5_0: return k32(Tag<Q5_0>{});
    case GGMLType::Q5_1: return k32(Tag<Q5_1>{});
    case GGMLType::Q8_0: return k32(Tag<Q8_0>{});
    case GGMLType::IQ4_NL: return k32(Tag<IQ4_NL>{});
    case GGMLType::Q4_K: return kk(Tag<Q4K>{});
    case GGMLType::Q5_K: return kk(Tag<Q5K>{});
    case GGMLType::Q6_K: return kk(Tag<Q6K>{});
    case GGMLType::IQ4_XS: return kk(Tag<IQ4XS>{});
    default: return {};
  }
}

}  // namespace
}  // namespace gaacrt::cpu::avx2
