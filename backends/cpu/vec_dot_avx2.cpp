// vec_dot_avx2.cpp — AVX2/FMA/F16C kernels for the 32-element block types and the float types
// (x86; compiled with -mavx2 -mfma -mf16c, called only after cpuid says yes). Same integers as
// vec_dot_scalar.cpp, 32 bytes at a time; shared/spec/gguf.md §2.9. K-quants: vec_dot_kquants_avx2.cpp.
//
// The tricks, all standard:
//   * nibbles -> bytes: the low nibbles of 16 bytes are elements 0..15 and the high ones 16..31,
//     so one 128-bit load, a 16-bit shift and an AND give all 32 in element order;
//   * _mm256_maddubs_epi16 multiplies unsigned by signed bytes and adds pairs into int16;
//     _mm256_madd_epi16 by 1 widens pairs into int32. Weights that fit in 0..31 go in unsigned and
//     their offset (-8 for Q4_0, -16 for Q5_0) comes back as offset * Σa, with Σa per 4-byte
//     group taken the same way; signed weights (Q8_0, IQ4_NL) use |w| and sign(a, w). Either
//     way lane i holds Σ over bytes 4i..4i+3 of (q_w - offset) * q_a, so the forms agree exactly.
//     No int16 can saturate: at most 127*127*2 = 32258 (activations never reach -128).
//   * each block's eight int32 lanes become floats and meet the block's scale product in one
//     FMA into that output's accumulator; float order differs from the scalar loop (~1e-7).
#include "vec_dot_avx2.h"

#include "common/half.h"

namespace gaacrt::cpu {
namespace avx2 {
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

template <class P, int RM, int RN>
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
    float mw[RM];
    for (int r = 0; r < RM; ++r) {
      const WB& b = reinterpret_cast<const WB*>(w + r * w_stride)[i];
      if constexpr (kSigned && !P::kSigned) wq[r] = P::signed_bytes(b);
      else wq[r] = P::bytes(b);
      if constexpr (kSigned) wabs[r] = _mm256_sign_epi8(wq[r], wq[r]);
      dw[r] = _mm256_set1_ps(fp16(b.d));
      if constexpr (P::kMin) mw[r] = fp16(b.m);
    }
    for (int t = 0; t < RN; ++t) {
      const AB& ab = reinterpret_cast<const AB*>(a + t * a_stride)[i];
      const __m256i qa = load256(ab.qs);
      const __m256 da = _mm256_set1_ps(fp16(ab.d));
      __m256i off = _mm256_setzero_si256();
      if constexpr (kOffsetShift > 0)
        off = _mm256_slli_epi32(dot_u8s8(_mm256_set1_epi8(1), qa), kOffsetShift);
      for (int r = 0; r < RM; ++r) {
        __m256i lanes;
        if constexpr (kSigned) lanes = dot_u8s8(wabs[r], _mm256_sign_epi8(qa, wq[r]));
        else lanes = dot_u8s8(wq[r], qa);
        if constexpr (kOffsetShift > 0) lanes = _mm256_sub_epi32(lanes, off);
        acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw[r], da), _mm256_cvtepi32_ps(lanes), acc[r][t]);
        if constexpr (P::kMin) extra[r][t] += mw[r] * fp16(ab.s);
      }
    }
  }
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t)
      out[t * out_stride + r] = P::kMin ? hsum(acc[r][t]) + extra[r][t] : hsum(acc[r][t]);
}

template <class P>
Kernels kernels32() {
  return {&dot_1x1<&tile32<P, 1, 1>>, &tile32<P, kTileRows, kTileTokens>, kTileRows, kTileTokens};
}

// ---- float weights: fp32 activations, four 8-lane FMA chains -------------------------------------

inline __m256 load8_f32(const void* w, int64_t i) { return _mm256_loadu_ps(static_cast<const float*>(w) + i); }
inline __m256 load8_f16(const void* w, int64_t i) { return _mm256_cvtph_ps(load128(static_cast<const uint16_t*>(w) + i)); }
inline __m256 load8_bf16(const void* w, int64_t i) {  // bf16 is the top half of an fp32
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(static_cast<const uint16_t*>(w) + i)), 16));
}
inline float load1_f32(const void* w, int64_t i) { return static_cast<const float*>(w)[i]; }
inline float load1_f16(const void* w, int64_t i) { return fp16(static_cast<const uint16_t*>(w)[i]); }
inline float load1_bf16(const void* w, int64_t i) { return bf16_to_f32(static_cast<const uint16_t*>(w)[i]); }

template <__m256 (*Load8)(const void*, int64_t), float (*Load1)(const void*, int64_t)>
float dot_float(int64_t n, const void* w, const void* va) {
  const float* a = static_cast<const float*>(va);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) acc[k] = _mm256_fmadd_ps(Load8(w, i + 8 * k), _mm256_loadu_ps(a + i + 8 * k), acc[k]);
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(Load8(w, i), _mm256_loadu_ps(a + i), acc[0]);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += Load1(w, i) * a[i];
  return sum;
}

Kernels kernels(GGMLType w) {
  switch (w) {
    case GGMLType::F32: return {&dot_float<load8_f32, load1_f32>};
    case GGMLType::F16: return {&dot_float<load8_f16, load1_f16>};
    case GGMLType::BF16: return {&dot_float<load8_bf16, load1_bf16>};
    case GGMLType::Q4_0: return kernels32<Q4_0>();
    case GGMLType::Q4_1: return kernels32<Q4_1>();
    case GGMLType::Q5_0: return kernels32<Q5_0>();
    case GGMLType::Q5_1: return kernels32<Q5_1>();
    case GGMLType::Q8_0: return kernels32<Q8_0>();
    case GGMLType::IQ4_NL: return kernels32<IQ4_NL>();
    default: return kquant_kernels(w);
  }
}

}  // namespace
}  // namespace avx2

VecDotFn vec_dot_avx2(GGMLType w) { return avx2::kernels(w).dot; }

GemmTile gemm_tile_avx2(GGMLType w) {
  const avx2::Kernels k = avx2::kernels(w);
  return k.tile ? GemmTile{k.tile_rows, k.tile_tokens, k.tile} : GemmTile{};
}

}  // namespace gaacrt::cpu
