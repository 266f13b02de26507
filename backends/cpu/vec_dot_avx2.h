// vec_dot_avx2.h — helpers shared by the AVX2 kernel files (include only from *_avx2.cpp: they are
// the files compiled with -mavx2 -mfma -mf16c).
//
// Kernels here are "tiles": RM weight rows × RN activation rows at once, so that a weight block is
// decoded once for RN tokens and an activation block loaded once for RM rows (prefill). Every
// (row, token) pair of a tile runs exactly the operations the 1×1 tile runs, in the same order,
// and vec_dot is the 1×1 tile: prefill and decode give bit-identical outputs.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/blocks.h"
#include "vec_dot.h"
#include "vec_dot_util.h"

namespace gaacrt::cpu::avx2 {

// ---- shared by the kernel files (which are built for different instruction-set flags) ----------

// A tile kernel: out[t * out_stride + r] = Σ w_r · a_t for r < RM, t < RN.
using TileFn = void (*)(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride,
                        float* out, int64_t out_stride);

// The 1×1 (vec_dot, decode) and the prefill tile instantiations of one weight type.
// (Decode tiles of several rows × 1 token were tried: ~20% faster with the weights in L3, but
// 10-40% slower streaming from DRAM — concurrent row streams defeat the prefetcher — and decode
// streams from DRAM.)
struct Kernels {
  VecDotFn dot = nullptr;
  TileFn tile = nullptr;  // tile_rows × tile_tokens
  int tile_rows = 0, tile_tokens = 0;
};
Kernels kquant_kernels(GGMLType w);  // vec_dot_kquants_avx2.cpp: Q4_K, Q5_K, Q6_K, IQ4_XS
Kernels plain_kernels32(GGMLType w);  // vec_dot_avx2.cpp: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL
Kernels vnni_kernels32(GGMLType w);   // vec_dot_vnni_avx2.cpp: the same with AVX512-VNNI
bool vnni_available();                // AVX512-VNNI + AVX512VL, compiled in and on this CPU
// Q16 activations (vec_dot_q16_avx2.h): every quantized type, madd (plain) or vpdpwssd (VNNI).
Kernels q16_kernels(GGMLType w);       // vec_dot_q16_avx2.cpp
Kernels q16_vnni_kernels(GGMLType w);  // vec_dot_q16_vnni_avx2.cpp

// ---- helpers: internal linkage, so that no copy built with one file's flags is shared ----------
namespace {

// The prefill tile shape of the 32-element types (remainders run 1×1).
constexpr int kTileRows = 2, kTileTokens = 4;

inline float fp16(uint16_t h) { return _cvtsh_ss(h); }  // exact, like fp16_to_f32 (NaNs aside)
// Two adjacent fp16 values (p[0], p[1]) -> lanes 0 and 1, one conversion.
inline __m128 fp16x2(const uint16_t* p) {
  uint32_t u;
  std::memcpy(&u, p, 4);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(u)));
}
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// 16 bytes of packed nibbles -> 32 bytes 0..15 in element order (low nibbles, then high; spec §2.1).
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i t = load128(qs);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline int hsum(__m128i s) {
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}
inline int hsum(__m256i v) { return hsum(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1))); }

// Σ over each group of 4 bytes of u8 × s8 (maddubs pairs into int16, madd by 1 pairs into int32):
// lane i holds bytes 4i..4i+3, whichever way the products were formed.
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// int16 element k of every 128-bit lane of v, in all eight int16 slots of that lane.
inline __m256i splat16(__m256i v, int k) {
  return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * k)));
}

// Q4_K/Q5_K scales and mins as 16 int16: sc0..7 in the low lane, mn0..7 in the high lane (the
// word arithmetic of unpack_q4k_scales, spec §2.4, kept in registers).
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

// Wraps a tile instantiation as a VecDotFn.
template <TileFn F>
float dot_1x1(int64_t n, const void* w, const void* a) {
  float y;
  F(n, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(a), 0, &y, 1);
  return y;
}

}  // namespace
}  // namespace gaacrt::cpu::avx2
