// vec_dot.cpp — picks the vec_dot kernel for (weight type, ISA), falling back to scalar.
#include "vec_dot.h"

#include "common/error.h"

namespace gaacrt::cpu {

#if !(defined(__x86_64__) || defined(_M_X64) || defined(__i386__))
VecDotFn vec_dot_avx2(GGMLType) { return nullptr; }  // vec_dot_avx2.cpp is built on x86 only
VecDotFn vec_dot_avx2_without_vnni(GGMLType) { return nullptr; }
GemmTile gemm_tile_avx2(GGMLType) { return {}; }
#endif
#if !defined(__aarch64__)
VecDotFn vec_dot_neon(GGMLType) { return nullptr; }  // vec_dot_neon.cpp is built on aarch64 only
#endif

VecDotFn vec_dot_fn(GGMLType w, Isa isa) {
  VecDotFn fn = nullptr;
  if (isa_available(isa)) {
    if (isa == Isa::AVX2) fn = vec_dot_avx2(w);
    if (isa == Isa::NEON) fn = vec_dot_neon(w);
  }
  if (!fn) fn = vec_dot_scalar(w);
  if (!fn)
    throw Error("quant", "unsupported_type",
                strfmt("matmul: weight type %s has no CPU vec_dot kernel", type_name(w)));
  return fn;
}

GemmTile gemm_tile_fn(GGMLType w, Isa isa) {
  if (isa == Isa::AVX2 && isa_available(isa)) return gemm_tile_avx2(w);
  return {};
}

}  // namespace gaacrt::cpu
