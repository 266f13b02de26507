// vec_dot_q16_vnni_avx2.cpp — the Q16-activation kernels (vec_dot_q16_avx2.h) with AVX512-VNNI:
// vpdpwssd multiplies int16 pairs and adds both products to an int32 lane in one instruction
// (madd + add in plain AVX2). The non-saturating form, so the lanes are exactly the plain
// kernels' (no lane comes near overflow, see the header) and results agree bit for bit. With
// AVX512VL the compiler also gets 32 vector registers, which the 2×4 prefill tile uses.
//
// Compiled with the *_avx2.cpp flags and enabling VNNI + VL for itself below; nothing here runs
// unless vnni_available() says the CPU has both.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512vnni,avx512vl")
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vnni,avx512vl"))), apply_to = function)
#endif

#include "vec_dot_q16_avx2.h"

namespace gaacrt::cpu::avx2 {
namespace {

struct DpwssdVNNI {  // lanes of w0·a0 + w1·a1: madd of the first pair, vpdpwssd adds the second
  static __m256i dot2(__m256i w0, __m256i a0, __m256i w1, __m256i a1) {
    return _mm256_dpwssd_epi32(_mm256_madd_epi16(w0, a0), w1, a1);
  }
};

}  // namespace

Kernels q16_vnni_kernels(GGMLType w) { return q16_kernel_table<DpwssdVNNI>(w); }

}  // namespace gaacrt::cpu::avx2

#if defined(__clang__)
#pragma clang attribute pop
#endif
