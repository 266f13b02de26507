// vec_dot.cpp — picks the vec_dot kernel for (weight type, ISA), falling back to scalar.
#include "vec_dot.h"

#include "common/error.h"
#include "quantize_act.h"

namespace gaacrt::cpu {

#if !(defined(__x86_64__) || defined(_M_X64) || defined(__i386__))
VecDotFn vec_dot_avx2(GGMLType) { return nullptr; }  // vec_dot_avx2.cpp is built on x86 only
VecDotFn vec_dot_avx2_without_vnni(GGMLType) { return nullptr; }
GemmTile gemm_tile_avx2(GGMLType) { return {}; }
VecDotFn vec_dot_q16_avx2(GGMLType) { return nullptr; }
VecDotFn vec_dot_q16_avx2_without_vnni(GGMLType) { return nullptr; }
GemmTile gemm_tile_q16_avx2(GGMLType) { return {}; }
#endif
#if !defined(__aarch64__)
VecDotFn vec_dot_neon(GGMLType) { return nullptr; }  // vec_dot_neon.cpp is built on aarch64 only
VecDotFn vec_dot_q16_neon(GGMLType) { return nullptr; }
#endif

VecDotFn vec_dot_fn(GGMLType w, Isa isa, int act_bits) {
  check_act_bits(act_bits);
  // Float weights have one kernel set (fp32 activations) whatever act_bits says.
  const bool q16 = act_bits == 16 && vec_dot_q16_scalar(w) != nullptr;
  VecDotFn fn = nullptr;
  if (isa_available(isa)) {
    if (isa == Isa::AVX2) fn = q16 ? vec_dot_q16_avx2(w) : vec_dot_avx2(w);
    if (isa == Isa::NEON) fn = q16 ? vec_dot_q16_neon(w) : vec_dot_neon(w);
  }
  if (!fn) fn = q16 ? vec_dot_q16_scalar(w) : vec_dot_scalar(w);
  if (!fn)
    throw Error("quant", "unsupported_type",
                strfmt("matmul: weight type %s has no CPU vec_dot kernel", type_name(w)));
  return fn;
}

GemmTile gemm_tile_fn(GGMLType w, Isa isa, int act_bits) {
  check_act_bits(act_bits);
  if (isa == Isa::AVX2 && isa_available(isa))
    return act_bits == 16 && vec_dot_q16_scalar(w) ? gemm_tile_q16_avx2(w) : gemm_tile_avx2(w);
  return {};
}

}  // namespace gaacrt::cpu
