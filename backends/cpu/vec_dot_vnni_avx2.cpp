// vec_dot_vnni_avx2.cpp — the 32-element block kernels (vec_dot_blocks32_avx2.h) with AVX512-VNNI:
// vpdpbusd does the u8×s8 products and their 4-byte sums into int32 in one instruction, where
// plain AVX2 needs maddubs + madd. Same int32 lanes (neither form saturates here), so the results
// equal the plain AVX2 kernels' bit for bit. Zen 4 and Intel server cores since Ice Lake have it;
// llama.cpp built with -march=native uses it too.
//
// This file is compiled with the *_avx2.cpp flags (cmake/cpu_backend.cmake) and enables VNNI and
// AVX512VL for itself below; nothing here runs unless vnni_available() says the CPU has both.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512vnni,avx512vl")
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vnni,avx512vl"))), apply_to = function)
#endif

#include "vec_dot_blocks32_avx2.h"

namespace gaacrt::cpu::avx2 {
namespace {

struct DotVNNI {
  static __m256i u8s8(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
};

template <class P>
Kernels kernels32() {
  return {&dot_1x1<&tile32<DotVNNI, P, 1, 1>>, &tile32<DotVNNI, P, kTileRows, kTileTokens>, kTileRows, kTileTokens};
}

}  // namespace

Kernels vnni_kernels32(GGMLType w) {
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

}  // namespace gaacrt::cpu::avx2

#if defined(__clang__)
#pragma clang attribute pop
#endif
