// vec_dot_avx2.cpp — the AVX2/FMA/F16C kernel table (x86; compiled with -mavx2 -mfma -mf16c and
// used only after cpuid says yes) and the float-weight kernels; shared/spec/gguf.md §2.9.
// The 32-element block types live in vec_dot_blocks32_avx2.h (instantiated here with maddubs +
// madd, and in vec_dot_vnni_avx2.cpp with vpdpbusd where the CPU has AVX512-VNNI), the K-quants
// in vec_dot_kquants_avx2.cpp.
#include "vec_dot_blocks32_avx2.h"

#include "common/half.h"

namespace gaacrt::cpu {
namespace avx2 {
namespace {

template <class P>
Kernels kernels32() {
  return {&dot_1x1<&tile32<DotAVX2, P, 1, 1>>, &tile32<DotAVX2, P, kTileRows, kTileTokens>, kTileRows, kTileTokens};
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
    case GGMLType::Q4_0: case GGMLType::Q4_1: case GGMLType::Q5_0: case GGMLType::Q5_1: case GGMLType::Q8_0:
    case GGMLType::IQ4_NL:
      if (vnni_available()) return vnni_kernels32(w);
      return plain_kernels32(w);
    default: return kquant_kernels(w);
  }
}

}  // namespace

bool vnni_available() {  // here, not in the VNNI file: this must not itself be built for AVX-512
  static const bool has = [] {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
  }();
  return has;
}

Kernels plain_kernels32(GGMLType w) {
  switch (w) {
    case GGMLType::Q4_0: return kernels32<Q4_0>();
    case GGMLType::Q4_1: return kernels32<Q4_1>();
    case GGMLType::Q5_0: return kernels32<Q5_0>();
    case GGMLType::Q5_1: return kernels32<Q5_1>();
    case GGMLType::Q8_0: return kernels32<Q8_0>();
    case GGMLType::IQ4_NL: return kernels32<IQ4_NL>();
    default: return {};
  }
}

}  // namespace avx2

VecDotFn vec_dot_avx2(GGMLType w) { return avx2::kernels(w).dot; }
VecDotFn vec_dot_avx2_without_vnni(GGMLType w) {
  const avx2::Kernels k = avx2::plain_kernels32(w);
  return k.dot ? k.dot : avx2::kernels(w).dot;
}

GemmTile gemm_tile_avx2(GGMLType w) {
  const avx2::Kernels k = avx2::kernels(w);
  return k.tile ? GemmTile{k.tile_rows, k.tile_tokens, k.tile} : GemmTile{};
}

}  // namespace gaacrt::cpu
