// vec_dot_q16_avx2.cpp — the Q16-activation kernels (vec_dot_q16_avx2.h) with plain AVX2: int16
// pairs multiplied and summed into int32 by _mm256_madd_epi16. Compiled with -mavx2 -mfma -mf16c
// (cmake/cpu_backend.cmake) and used only after cpuid says yes.
#include "vec_dot_q16_avx2.h"

namespace gaacrt::cpu {
namespace avx2 {
namespace {

struct MaddAVX2 {  // lanes of w0·a0 + w1·a1 (4 products per int32 lane)
  static __m256i dot2(__m256i w0, __m256i a0, __m256i w1, __m256i a1) {
    return _mm256_add_epi32(_mm256_madd_epi16(w0, a0), _mm256_madd_epi16(w1, a1));
  }
};

}  // namespace

Kernels q16_kernels(GGMLType w) { return q16_kernel_table<MaddAVX2>(w); }

}  // namespace avx2

VecDotFn vec_dot_q16_avx2(GGMLType w) {
  const avx2::Kernels k = avx2::vnni_available() ? avx2::q16_vnni_kernels(w) : avx2::q16_kernels(w);
  return k.dot;
}
VecDotFn vec_dot_q16_avx2_without_vnni(GGMLType w) { return avx2::q16_kernels(w).dot; }

GemmTile gemm_tile_q16_avx2(GGMLType w) {
  const avx2::Kernels k = avx2::vnni_available() ? avx2::q16_vnni_kernels(w) : avx2::q16_kernels(w);
  return k.tile ? GemmTile{k.tile_rows, k.tile_tokens, k.tile} : GemmTile{};
}

}  // namespace gaacrt::cpu
