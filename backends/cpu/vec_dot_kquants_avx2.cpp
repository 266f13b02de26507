// vec_dot_kquants_avx2.cpp — AVX2 tile kernels for the 256-element super-block types (Q4_K, Q5_K,
// Q6_K, IQ4_XS) against Q8_K activations; shared/spec/gguf.md §2.4-2.6b, §2.9.
//
// Sub-block scales are applied on int16 pairs with _mm256_madd_epi16 (the scale splatted across
// a lane by a byte shuffle from one register), mins and Q6_K's -32 via the activation's bsums.
// Each super-block leaves eight exact int32 lanes (the same integers as vec_dot_scalar.cpp, only
// spread over lanes) that meet d_w*d_a in one FMA into float lanes, summed once at the end of the
// row. (A first version reduced every super-block to one int32 and did the scalar float step, so
// it matched scalar bit for bit, but those horizontal sums and the serial float chain cost ~30%
// against llama.cpp's kernels; float-order differences are ~1e-7 relative.)
#include "vec_dot_avx2.h"

namespace gaacrt::cpu::avx2 {
namespace {

template <typename B>
inline const B& block(const uint8_t* base, size_t stride, int r, int64_t i) {
  return reinterpret_cast<const B*>(base + r * stride)[i];
}

template <bool kFifthBit, typename Block, int RM, int RN>
void tile_q45_k(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* out, int64_t os) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  __m256 facc[RM][RN];
  __m128 macc[RM][RN];
  for (int r = 0; r < RM; ++r) for (int t = 0; t < RN; ++t) { facc[r][t] = _mm256_setzero_ps(); macc[r][t] = _mm_setzero_ps(); }
  for (int64_t i = 0; i < n / QK_K; ++i) {
    __m256i sc[RM], hb[RM];
    __m128i sub_sums[RN];
    for (int t = 0; t < RN; ++t) {
      const int16_t* bs = block<block_q8_k>(a, as, t, i).bsums;
      sub_sums[t] = _mm_hadd_epi16(load128(bs), load128(bs + 8));  // 8 sub-block sums of qa
    }
    for (int r = 0; r < RM; ++r) {
      const Block& b = block<Block>(w, ws, r, i);
      const __m256i sm = q4k_scales_mins(b.scales);
      sc[r] = _mm256_permute2x128_si256(sm, sm, 0x00);  // sc0..7 in both lanes
      // the min term, Σj mn_j * (Σ qa over sub-block j), as 4 int32 lanes scaled by dmin*da
      const __m128 dmin = _mm_set1_ps(fp16(b.dmin));
      for (int t = 0; t < RN; ++t)
        macc[r][t] = _mm_fmadd_ps(_mm_mul_ps(dmin, _mm_set1_ps(block<block_q8_k>(a, as, t, i).d)),
                                  _mm_cvtepi32_ps(_mm_madd_epi16(_mm256_extracti128_si256(sm, 1), sub_sums[t])), macc[r][t]);
      if constexpr (kFifthBit) hb[r] = load256(b.qh);
    }
    __m256i acc[RM][RN];
    for (int r = 0; r < RM; ++r)
      for (int t = 0; t < RN; ++t) acc[r][t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {  // 64 elements: sub-block 2c (low nibbles), 2c+1 (high)
      __m256i lo[RM], hi[RM];
      for (int r = 0; r < RM; ++r) {
        const __m256i q = load256(block<Block>(w, ws, r, i).qs + 32 * c);
        lo[r] = _mm256_and_si256(q, m4);
        hi[r] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if constexpr (kFifthBit) {  // bit 2c of qh[l] -> bit 4 of lo[l], bit 2c+1 -> bit 4 of hi[l]
          lo[r] = _mm256_or_si256(lo[r], _mm256_slli_epi16(_mm256_and_si256(hb[r], one), 4));
          hi[r] = _mm256_or_si256(hi[r], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb[r], 1), one), 4));
          hb[r] = _mm256_srli_epi16(hb[r], 2);
        }
      }
      for (int t = 0; t < RN; ++t) {
        const int8_t* qa = block<block_q8_k>(a, as, t, i).qs + 64 * c;
        const __m256i a0 = load256(qa), a1 = load256(qa + 32);
        for (int r = 0; r < RM; ++r) {
          acc[r][t] = _mm256_add_epi32(acc[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(lo[r], a0), splat16(sc[r], 2 * c)));
          acc[r][t] = _mm256_add_epi32(acc[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(hi[r], a1), splat16(sc[r], 2 * c + 1)));
        }
      }
    }
    for (int r = 0; r < RM; ++r) {
      const __m256 dw = _mm256_set1_ps(fp16(block<Block>(w, ws, r, i).d));
      for (int t = 0; t < RN; ++t)
        facc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(block<block_q8_k>(a, as, t, i).d)), _mm256_cvtepi32_ps(acc[r][t]), facc[r][t]);
    }
  }
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t) {
      __m128 m = macc[r][t];
      m = _mm_add_ps(m, _mm_movehl_ps(m, m));
      m = _mm_add_ss(m, _mm_movehdup_ps(m));
      out[t * os + r] = hsum(facc[r][t]) - _mm_cvtss_f32(m);
    }
}

// Q6_K: the 6-bit q (0..63) goes into maddubs unsigned; the -32 comes back as
// 32 * Σk sc_k * bsums_k, one madd per super-block and pair.
template <int RM, int RN>
void tile_q6_k(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* out, int64_t os) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03), m2hi = _mm256_set1_epi8(0x30);
  __m256 facc[RM][RN];
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t) facc[r][t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    __m256i sc16[RM], acc[RM][RN];
    for (int r = 0; r < RM; ++r) {
      sc16[r] = _mm256_cvtepi8_epi16(load128(block<block_q6_k>(w, ws, r, i).scales));
      for (int t = 0; t < RN; ++t)  // start from -32 * Σk sc_k * bsums_k, spread over 8 lanes
        acc[r][t] = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_setzero_si256(),
                                                       _mm256_madd_epi16(sc16[r], load256(block<block_q8_k>(a, as, t, i).bsums))), 5);
    }
    for (int h = 0; h < 2; ++h) {  // 128 elements: ql[64h..], qh[32h..], scales[8h..]
      __m256i q[RM][4], s[RM];
      for (int r = 0; r < RM; ++r) {
        const block_q6_k& b = block<block_q6_k>(w, ws, r, i);
        const __m256i l0 = load256(b.ql + 64 * h), l1 = load256(b.ql + 64 * h + 32);
        const __m256i hh = load256(b.qh + 32 * h), hh2 = _mm256_srli_epi16(hh, 2);
        q[r][0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hh, m2), 4));
        q[r][1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(hh2, m2), 4));
        q[r][2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hh, m2hi));
        q[r][3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(hh2, m2hi));
        // scales 8h..8h+7 (int16) in both lanes
        s[r] = h == 0 ? _mm256_permute2x128_si256(sc16[r], sc16[r], 0x00) : _mm256_permute2x128_si256(sc16[r], sc16[r], 0x11);
      }
      for (int g = 0; g < 4; ++g) {
        // group g = elements 32g..32g+31 of this half: scale 8h+2g for its first 16 (low lane),
        // 8h+2g+1 for the rest (high lane)
        const long long lo = 0x0100010001000100LL + 0x0404040404040404LL * g;  // bytes 4g, 4g+1
        const long long hi = 0x0302030203020302LL + 0x0404040404040404LL * g;  // bytes 4g+2, 4g+3
        const __m256i pick = _mm256_setr_epi64x(lo, lo, hi, hi);
        for (int t = 0; t < RN; ++t) {
          const __m256i qa = load256(block<block_q8_k>(a, as, t, i).qs + 128 * h + 32 * g);
          for (int r = 0; r < RM; ++r)
            acc[r][t] = _mm256_add_epi32(acc[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(q[r][g], qa),
                                                                      _mm256_shuffle_epi8(s[r], pick)));
        }
      }
    }
    for (int r = 0; r < RM; ++r) {
      const __m256 dw = _mm256_set1_ps(fp16(block<block_q6_k>(w, ws, r, i).d));
      for (int t = 0; t < RN; ++t)
        facc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(block<block_q8_k>(a, as, t, i).d)),
                                     _mm256_cvtepi32_ps(acc[r][t]), facc[r][t]);
    }
  }
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t) out[t * os + r] = hsum(facc[r][t]);
}

template <int RM, int RN>
void tile_iq4_xs(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* out, int64_t os) {
  const __m256i table = _mm256_broadcastsi128_si256(load128(kIQ4NLTable));
  __m256 facc[RM][RN];
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t) facc[r][t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int ls[RM][8];
    __m256i acc[RM][RN];
    for (int r = 0; r < RM; ++r) {
      unpack_iq4xs_scales(block<block_iq4_xs>(w, ws, r, i), ls[r]);
      for (int t = 0; t < RN; ++t) acc[r][t] = _mm256_setzero_si256();
    }
    for (int ib = 0; ib < 8; ++ib) {
      __m256i qw[RM], qabs[RM], scale[RM];
      for (int r = 0; r < RM; ++r) {
        qw[r] = _mm256_shuffle_epi8(table, unpack_nibbles(block<block_iq4_xs>(w, ws, r, i).qs + 16 * ib));
        qabs[r] = _mm256_sign_epi8(qw[r], qw[r]);
        scale[r] = _mm256_set1_epi16(static_cast<int16_t>(ls[r][ib]));
      }
      for (int t = 0; t < RN; ++t) {
        const __m256i qa = load256(block<block_q8_k>(a, as, t, i).qs + 32 * ib);
        for (int r = 0; r < RM; ++r)
          acc[r][t] = _mm256_add_epi32(acc[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(qabs[r], _mm256_sign_epi8(qa, qw[r])),
                                                                    scale[r]));
      }
    }
    for (int r = 0; r < RM; ++r) {
      const __m256 dw = _mm256_set1_ps(fp16(block<block_iq4_xs>(w, ws, r, i).d));
      for (int t = 0; t < RN; ++t)
        facc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(block<block_q8_k>(a, as, t, i).d)),
                                     _mm256_cvtepi32_ps(acc[r][t]), facc[r][t]);
    }
  }
  for (int r = 0; r < RM; ++r)
    for (int t = 0; t < RN; ++t) out[t * os + r] = hsum(facc[r][t]);
}

// Prefill tile: 1 row × 4 tokens. A K-quant row-block holds more live registers (scales, both
// nibble halves, float and min accumulators) than a 32-element one; 2 × 4 spilled.
constexpr int kTileRowsK = 1, kTileTokensK = 4;

template <TileFn T11, TileFn TILE>
Kernels make() { return {&dot_1x1<T11>, TILE, kTileRowsK, kTileTokensK}; }

}  // namespace

Kernels kquant_kernels(GGMLType w) {
  switch (w) {
    case GGMLType::Q4_K:
      return make<&tile_q45_k<false, block_q4_k, 1, 1>, &tile_q45_k<false, block_q4_k, kTileRowsK, kTileTokensK>>();
    case GGMLType::Q5_K:
      return make<&tile_q45_k<true, block_q5_k, 1, 1>, &tile_q45_k<true, block_q5_k, kTileRowsK, kTileTokensK>>();
    case GGMLType::Q6_K: return make<&tile_q6_k<1, 1>, &tile_q6_k<kTileRowsK, kTileTokensK>>();
    case GGMLType::IQ4_XS: return make<&tile_iq4_xs<1, 1>, &tile_iq4_xs<kTileRowsK, kTileTokensK>>();
    default: return {};
  }
}

}  // namespace gaacrt::cpu::avx2
