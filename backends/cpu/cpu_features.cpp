// cpu_features.cpp — cpuid on x86 (through the compiler builtin), NEON is baseline on aarch64.
#include "cpu_features.h"

namespace gaacrt::cpu {

bool cpu_has_avx2() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  }();
  return has;
#else
  return false;
#endif
}

bool isa_available(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::AVX2: return cpu_has_avx2();
    case Isa::NEON:
#if defined(__aarch64__)
      return true;
#else
      return false;
#endif
  }
  return false;
}

Isa best_isa() {
  if (isa_available(Isa::NEON)) return Isa::NEON;
  if (isa_available(Isa::AVX2)) return Isa::AVX2;
  return Isa::Scalar;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::AVX2: return "avx2";
    case Isa::NEON: return "neon";
  }
  return "?";
}

}  // namespace gaacrt::cpu
