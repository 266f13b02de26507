// vec_dot_blocks32_avx2.h — the AVX2 tile kernel of the 32-element block types (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, IQ4_NL against Q8_0/Q8_1), shared by two translation units: vec_dot_avx2.cpp
// (plain AVX2: maddubs + madd) and vec_dot_vnni_avx2.cpp (the same kernels with the u8×s8 4-byte
// dot done by one AVX512-VNNI vpdpbusd), chosen by the Dot template parameter.
//
// The tricks, all standard:
//   * nibbles -> bytes: the low nibbles of 16 bytes are elements 0..15 and the high ones 16..31,
//     so one 128-bit load, a 16-bit shift and an AND give all 32 in element order;
//   * Dot::u8s8 multiplies unsigned by signed bytes and sums each group of 4 into an int32 lane.
//     Weights that fit in 0..31 go in unsigned and their offset (-8 for Q4_0, -16 for Q5_0) comes
//     back as offset * Σa, with Σa per 4-byte group taken the same way; signed weights (Q8_0,
//     IQ4_NL, and the offset types in 1-token kernels) use |w| and sign(a, w). Either way lane i
//     holds Σ over bytes 4i..4i+3 of (q_w - offset) * q_a, so all forms agree exactly. No int16
//     can saturate in the maddubs form: at most 127*127*2 = 32258 (activations never reach -128).
//   * each block's eight int32 lanes become floats and meet the block's scale product in one
//     FMA into that output's accumulator; float order differs from the scalar loop (~1e-7).
//
// Everything here has internal linkage (anonymous namespace): the two including files are built
// for different instruction sets, and an inline function the linker merged across them could put
// AVX-512 code on a path that runs on AVX2-only CPUs.
#pragma once
#include "vec_dot_avx2.h"

namespace gaacrt::cpu::avx2 {
namespace {

// 32 bits -> 32 bytes, 0xFF where bit i is set: byte i takes the byte holding bit i, then one
// bit of it is tested.
inline __m256i bits_to_bytes(uint32_t x) {
  const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), pick);
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

template <typename Block>
inline __m256i q5_bytes(const Block& b) {  // 0..31 in element order (fifth bit from qh, spec §2.2)
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  return _mm256_or_si256(unpack_nibbles(b.qs), _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
}

// ---- per-type policies: how a weight block becomes 32 bytes -----------------------------------
// kSigned: the bytes are signed (sign trick); else unsigned 0..31 with kOffsetShift = log2 of the
// offset subtracted (0: none). kMin: Q4_1/Q5_1, whose +m comes in as m * s_activation.
// Offset types also give signed_bytes() = bytes() - offset, for the 1-token kernels: with one
// token the offset sums cannot be shared, and the sign trick is fewer instructions.
struct Q4_0 { using WB = block_q4_0; using AB = block_q8_0; static constexpr bool kSigned = false, kMin = false;
  static constexpr int kOffsetShift = 3;
  static __m256i bytes(const WB& b) { return unpack_nibbles(b.qs); }
  static __m256i signed_bytes(const WB& b) { return _mm256_sub_epi8(unpack_nibbles(b.qs), _mm256_set1_epi8(8)); } };
struct Q4_1 { using WB = block_q4_1; using AB = block_q8_1; static constexpr bool kSigned = false, kMin = true;
  static constexpr int kOffsetShift = 0;
  static __m256i bytes(const WB& b) { return unpack_nibbles(b.qs); } };
struct Q5_0 { using WB = block_q5_0; using AB = block_q8_0; static constexpr bool kSigned = false, kMin = false;
  static constexpr int kOffsetShift = 4;
  static __m256i bytes(const WB& b) { return q5_bytes(b); }
  static __m256i signed_bytes(const WB& b) {  // q - 16: a clear fifth bit sets the top nibble (n | 0xF0 = n - 16)
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    return _mm256_or_si256(unpack_nibbles(b.qs), _mm256_andnot_si256(bits_to_bytes(qh), _mm256_set1_epi8(static_cast<char>(0xF0))));
  } };
struct Q5_1 { using WB = block_q5_1; using AB = block_q8_1; static constexpr bool kSigned = false, kMin = true;
  static constexpr int kOffsetShift = 0;
  static __m256i bytes(const WB& b) { return q5_bytes(b); } };
struct Q8_0 { using WB = block_q8_0; using AB = block_q8_0; static constexpr bool kSigned = true, kMin = false;
  static constexpr int kOffsetShift = 0;
  static __m256i bytes(const WB& b) { return load256(b.qs); } };
struct IQ4_NL { using WB = block_iq4_nl; using AB = block_q8_0; static constexpr bool kSigned = true, kMin = false;
  static constexpr int kOffsetShift = 0;
  static __m256i bytes(const WB& b) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(load128(kIQ4NLTable)), unpack_nibbles(b.qs));
  } };

// Dot::u8s8(u, s): eight int32 lanes, lane i = Σ over bytes 4i..4i+3 of u (unsigned) × s (signed).
struct DotAVX2 {
  static __m256i u8s8(__m256i u, __m256i s) { return dot_u8s8(u, s); }
};

template <class Dot, class P, int RM, int RN>
void tile32(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride, float* out,
            int64_t out_stride) {
  using WB = typename P::WB;
  using AB = typename P::AB;
  // Signed bytes with the sign trick, or unsigned bytes minus offset * Σa: the same int32 lanes.
  constexpr bool kSigned = P::kSigned || (P::kOffsetShift > 0 && RN == 1);
  constexpr int kOffsetShift = kSigned ? 0 : P::kOffsetShift;
  __m256 acc[RM][RN];
  float extra[RM][RN];  // Q4_1/Q5_1: Σ m*s, summed in block order
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t) { acc[r][t] = _mm256_setzero_ps(); extra[r][t] = 0.0f; }
  for (int64_t i = 0; i < n / 32; ++i) {
    __m256i wq[RM], wabs[RM];
    __m256 dw[RM];
    __m128 dmw[RM];  // Q4_1/Q5_1: (d, m) of the weight block
    for (int r = 0; r < RM; ++r) {
      const WB& b = reinterpret_cast<const WB*>(w + r * w_stride)[i];
      if constexpr (kSigned && !P::kSigned) wq[r] = P::signed_bytes(b);
      else wq[r] = P::bytes(b);
      if constexpr (kSigned) wabs[r] = _mm256_sign_epi8(wq[r], wq[r]);
      if constexpr (P::kMin) dmw[r] = fp16x2(&b.d);  // d and m are adjacent: one conversion
      else dw[r] = _mm256_set1_ps(fp16(b.d));
    }
    for (int t = 0; t < RN; ++t) {
      const AB& ab = reinterpret_cast<const AB*>(a + t * a_stride)[i];
      const __m256i qa = load256(ab.qs);
      __m256 da;
      __m128 dsa;  // Q8_1: (d, s) of the activation block
      if constexpr (P::kMin) dsa = fp16x2(&ab.d);
      else da = _mm256_set1_ps(fp16(ab.d));
      __m256i off = _mm256_setzero_si256();
      if constexpr (kOffsetShift > 0)
        off = _mm256_slli_epi32(Dot::u8s8(_mm256_set1_epi8(1), qa), kOffsetShift);
      for (int r = 0; r < RM; ++r) {
        __m256i lanes;
        if constexpr (kSigned) lanes = Dot::u8s8(wabs[r], _mm256_sign_epi8(qa, wq[r]));
        else lanes = Dot::u8s8(wq[r], qa);
        if constexpr (kOffsetShift > 0) lanes = _mm256_sub_epi32(lanes, off);
        if constexpr (P::kMin) {  // lane 0: d_w*d_a, lane 1: m_w*s_a — the same products as scalar
          const __m128 p = _mm_mul_ps(dmw[r], dsa);
          acc[r][t] = _mm256_fmadd_ps(_mm256_broadcastss_ps(p), _mm256_cvtepi32_ps(lanes), acc[r][t]);
          extra[r][t] += _mm_cvtss_f32(_mm_movehdup_ps(p));
        } else {
          acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw[r], da), _mm256_cvtepi32_ps(lanes), acc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t)
      out[t * out_stride + r] = P::kMin ? hsum(acc[r][t]) + extra[r][t] : hsum(acc[r][t]);
}

}  // namespace
}  // namespace gaacrt::cpu::avx2
