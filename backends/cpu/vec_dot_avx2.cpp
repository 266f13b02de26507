// vec_dot_avx2.cpp — AVX2/FMA/F16C vec_dot kernels (x86; compiled with -mavx2 -mfma -mf16c and
// only called after cpuid says yes). Same integers as vec_dot_scalar.cpp, computed 32 bytes at a
// time; shared/spec/gguf.md §2.9.
//
// The tricks, all standard:
//   * nibbles -> bytes: low nibbles of 16 bytes are elements 0..15 and the high nibbles 16..31
//     (spec §2.1), so one 128-bit load, a 16-bit shift and an AND give all 32 in element order;
//   * u8 × s8 products: _mm256_maddubs_epi16 multiplies unsigned by signed bytes and adds pairs
//     into int16, _mm256_madd_epi16 by 1 (or by a scale) widens pairs to int32. Signed × signed
//     uses |w| and sign(a, w) (_mm256_sign_epi8) to fit that form. No int16 can saturate: the
//     largest pair is 127*127*2 = 32258 (activations never reach -128, see quantize_act.h);
//   * 32-element blocks: each block's eight int32 lane sums become floats and meet the block
//     scale in one FMA into eight float accumulators (float order differs from scalar, ~1e-7);
//   * K-quants: sub-block scales are applied with madd on int16, mins via bsums, and the whole
//     super-block is one int32 before the float step — bit-identical to the scalar path.
#include <immintrin.h>

#include "common/half.h"
#include "quant/blocks.h"
#include "vec_dot.h"
#include "vec_dot_util.h"

namespace gaacrt::cpu {
namespace {

inline float fp16(uint16_t h) { return _cvtsh_ss(h); }  // exact, like fp16_to_f32 (NaNs aside)

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// 16 bytes of packed nibbles -> 32 bytes 0..15 in element order (low nibbles, then high).
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i t = load128(qs);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}

// 32 bits -> 32 bytes, 0xFF where bit i is set: byte i takes the byte holding bit i, then one
// bit of it is tested.
inline __m256i bits_to_bytes(uint32_t x) {
  const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), pick);
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

// Σ over pairs of u8 × s8, as eight int32.
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
// Σ over pairs of s8 × s8 (w may be -128; a must not be).
inline __m256i dot_s8s8(__m256i w, __m256i a) {
  return dot_u8s8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline int hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// acc += d * float(lanes)
inline __m256 scale_acc(__m256 acc, float d, __m256i lanes) {
  return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), acc);
}

// ---- 32-element blocks --------------------------------------------------------------------------
// Two blocks per iteration into two accumulators: independent FMA chains, and the loads of the
// second block overlap the arithmetic of the first.

template <typename WB, typename AB, typename BlockDot>
float dot_blocks32(int64_t n, const void* vw, const void* va, BlockDot block_dot) {
  const WB* w = static_cast<const WB*>(vw);
  const AB* a = static_cast<const AB*>(va);
  const int64_t nb = n / 32;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  float extra = 0.0f;  // Q4_1/Q5_1: Σ m*s
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    acc0 = block_dot(w[i], a[i], acc0, extra);
    acc1 = block_dot(w[i + 1], a[i + 1], acc1, extra);
  }
  if (i < nb) acc0 = block_dot(w[i], a[i], acc0, extra);
  return hsum(_mm256_add_ps(acc0, acc1)) + extra;
}

float dot_q4_0(int64_t n, const void* w, const void* a) {
  return dot_blocks32<block_q4_0, block_q8_0>(n, w, a, [](const block_q4_0& bw, const block_q8_0& ba, __m256 acc, float&) {
    const __m256i qw = _mm256_sub_epi8(unpack_nibbles(bw.qs), _mm256_set1_epi8(8));
    return scale_acc(acc, fp16(bw.d) * fp16(ba.d), dot_s8s8(qw, load256(ba.qs)));
  });
}

float dot_q4_1(int64_t n, const void* w, const void* a) {
  return dot_blocks32<block_q4_1, block_q8_1>(n, w, a, [](const block_q4_1& bw, const block_q8_1& ba, __m256 acc, float& extra) {
    extra += fp16(bw.m) * fp16(ba.s);
    return scale_acc(acc, fp16(bw.d) * fp16(ba.d), dot_u8s8(unpack_nibbles(bw.qs), load256(ba.qs)));
  });
}

template <typename Block>
inline __m256i q5_bytes(const Block& b) {  // 0..31 in element order
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  return _mm256_or_si256(unpack_nibbles(b.qs), _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
}

float dot_q5_0(int64_t n, const void* w, const void* a) {
  return dot_blocks32<block_q5_0, block_q8_0>(n, w, a, [](const block_q5_0& bw, const block_q8_0& ba, __m256 acc, float&) {
    const __m256i qw = _mm256_sub_epi8(q5_bytes(bw), _mm256_set1_epi8(16));
    return scale_acc(acc, fp16(bw.d) * fp16(ba.d), dot_s8s8(qw, load256(ba.qs)));
  });
}

float dot_q5_1(int64_t n, const void* w, const void* a) {
  return dot_blocks32<block_q5_1, block_q8_1>(n, w, a, [](const block_q5_1& bw, const block_q8_1& ba, __m256 acc, float& extra) {
    extra += fp16(bw.m) * fp16(ba.s);
    return scale_acc(acc, fp16(bw.d) * fp16(ba.d), dot_u8s8(q5_bytes(bw), load256(ba.qs)));
  });
}

float dot_q8_0(int64_t n, const void* w, const void* a) {
  return dot_blocks32<block_q8_0, block_q8_0>(n, w, a, [](const block_q8_0& bw, const block_q8_0& ba, __m256 acc, float&) {
    return scale_acc(acc, fp16(bw.d) * fp16(ba.d), dot_s8s8(load256(bw.qs), load256(ba.qs)));
  });
}

inline __m256i iq4nl_table() { return _mm256_broadcastsi128_si256(load128(kIQ4NLTable)); }

float dot_iq4_nl(int64_t n, const void* w, const void* a) {
  return dot_blocks32<block_iq4_nl, block_q8_0>(n, w, a, [](const block_iq4_nl& bw, const block_q8_0& ba, __m256 acc, float&) {
    const __m256i qw = _mm256_shuffle_epi8(iq4nl_table(), unpack_nibbles(bw.qs));
    return scale_acc(acc, fp16(bw.d) * fp16(ba.d), dot_s8s8(qw, load256(ba.qs)));
  });
}

// ---- K-quants (256-element super-blocks) -----------------------------------------------------------

// Q4_K/Q5_K scales and mins as one vector of 16 int16: sc0..7 in the low lane, mn0..7 in the
// high lane (the word arithmetic of unpack_q4k_scales, kept in registers).
inline __m256i q4k_scales_mins(const uint8_t* s) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  const uint32_t lo6 = 0x3f3f3f3fu, lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
  const __m128i b = _mm_setr_epi32(static_cast<int>(u[0] & lo6),
                                   static_cast<int>((u[2] & lo4) | (((u[0] >> 6) & lo2) << 4)),
                                   static_cast<int>(u[1] & lo6),
                                   static_cast<int>(((u[2] >> 4) & lo4) | (((u[1] >> 6) & lo2) << 4)));
  return _mm256_cvtepu8_epi16(b);
}

// int16 element k of every 128-bit lane of v, in all eight int16 slots of that lane.
inline __m256i splat16(__m256i v, int k) { return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * k))); }

// Σj mn_j * (Σ qa over sub-block j): the 16 bsums added in pairs (a sub-block is 32 values).
inline int q4k_min_term(__m256i scales_mins, const int16_t* bsums) {
  const __m128i sums = _mm_hadd_epi16(load128(bsums), load128(bsums + 8));
  __m128i p = _mm_madd_epi16(_mm256_extracti128_si256(scales_mins, 1), sums);
  p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(1, 0, 3, 2)));
  p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(p);
}

template <bool kFifthBit, typename Block>
float dot_q45_k(int64_t n, const void* vw, const void* va) {
  const Block* w = static_cast<const Block*>(vw);
  const block_q8_k* a = static_cast<const block_q8_k*>(va);
  const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const __m256i sm = q4k_scales_mins(w[i].scales);
    const int summ = q4k_min_term(sm, a[i].bsums);
    const __m256i sc = _mm256_permute2x128_si256(sm, sm, 0x00);  // sc0..7 in both lanes
    __m256i hb;
    if constexpr (kFifthBit) hb = load256(w[i].qh);
    __m256i acc = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {  // 64 elements: sub-block 2c (low nibbles), 2c+1 (high)
      const __m256i q = load256(w[i].qs + 32 * c);
      __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFifthBit) {  // bit 2c of qh[l] -> bit 4 of lo[l], bit 2c+1 -> bit 4 of hi[l]
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4));
        hb = _mm256_srli_epi16(hb, 2);
      }
      const __m256i p0 = _mm256_maddubs_epi16(lo, load256(a[i].qs + 64 * c));
      const __m256i p1 = _mm256_maddubs_epi16(hi, load256(a[i].qs + 64 * c + 32));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p0, splat16(sc, 2 * c)));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p1, splat16(sc, 2 * c + 1)));
    }
    const float d = fp16(w[i].d) * a[i].d, dmin = fp16(w[i].dmin) * a[i].d;
    sum += d * static_cast<float>(hsum(acc)) - dmin * static_cast<float>(summ);
  }
  return sum;
}

// Q6_K: the 6-bit q (0..63) goes into maddubs unsigned; the -32 comes back as
// 32 * Σk sc_k * bsums_k, one madd per super-block.
float dot_q6_k(int64_t n, const void* vw, const void* va) {
  const block_q6_k* w = static_cast<const block_q6_k*>(vw);
  const block_q8_k* a = static_cast<const block_q8_k*>(va);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03), m2hi = _mm256_set1_epi8(0x30);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(w[i].scales));
    const int offset = hsum(_mm256_madd_epi16(sc16, load256(a[i].bsums)));
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {  // 128 elements: ql[64h..], qh[32h..], scales[8h..]
      const __m256i l0 = load256(w[i].ql + 64 * h), l1 = load256(w[i].ql + 64 * h + 32);
      const __m256i hh = load256(w[i].qh + 32 * h), hh2 = _mm256_srli_epi16(hh, 2);
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hh, m2), 4)),
          _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(hh2, m2), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hh, m2hi)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(hh2, m2hi)),
      };
      // scales 8h..8h+7 (int16) in both lanes; group g wants 8h+2g in the low lane (its first
      // 16 elements) and 8h+2g+1 in the high lane.
      const __m256i s = _mm256_permute2x128_si256(sc16, sc16, h == 0 ? 0x00 : 0x11);
      for (int g = 0; g < 4; ++g) {
        const __m256i p = _mm256_maddubs_epi16(q[g], load256(a[i].qs + 128 * h + 32 * g));
        const long long lo = 0x0100010001000100LL + 0x0404040404040404LL * g;  // bytes 4g, 4g+1
        const long long hi = 0x0302030203020302LL + 0x0404040404040404LL * g;  // bytes 4g+2, 4g+3
        const __m256i pick = _mm256_setr_epi64x(lo, lo, hi, hi);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_shuffle_epi8(s, pick)));
      }
    }
    sum += (fp16(w[i].d) * a[i].d) * static_cast<float>(hsum(acc) - 32 * offset);
  }
  return sum;
}

float dot_iq4_xs(int64_t n, const void* vw, const void* va) {
  const block_iq4_xs* w = static_cast<const block_iq4_xs*>(vw);
  const block_q8_k* a = static_cast<const block_q8_k*>(va);
  const __m256i table = iq4nl_table();
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int ls[8];
    unpack_iq4xs_scales(w[i], ls);
    __m256i acc = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i qw = _mm256_shuffle_epi8(table, unpack_nibbles(w[i].qs + 16 * ib));
      const __m256i qa = load256(a[i].qs + 32 * ib);
      const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qa, qw));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(static_cast<int16_t>(ls[ib]))));
    }
    sum += (fp16(w[i].d) * a[i].d) * static_cast<float>(hsum(acc));
  }
  return sum;
}

// ---- float weights ------------------------------------------------------------------------------

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

}  // namespace

VecDotFn vec_dot_avx2(GGMLType w) {
  switch (w) {
    case GGMLType::F32: return &dot_float<load8_f32, load1_f32>;
    case GGMLType::F16: return &dot_float<load8_f16, load1_f16>;
    case GGMLType::BF16: return &dot_float<load8_bf16, load1_bf16>;
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
