// vec_dot.h — dot products of one weight row with one (quantized) activation row, per ISA.
//
// shared/spec/gguf.md §2.9. The activation row is in act_type(weight type) format (quantize_act.h):
// every kernel multiplies integer weights by int8 activations, sums each block in int32 (exact),
// and applies the block's float scales once. K-quants fold their sub-block scales in as integers
// too, so a whole 256-element super-block is one exact integer before it meets a float.
//
// Three implementations with the same contract:
//   vec_dot_scalar.cpp  plain C++, the reference the others are tested against;
//   vec_dot_avx2.cpp    x86 AVX2/FMA/F16C (chosen at run time after cpuid);
//   vec_dot_neon.cpp    aarch64 NEON (vdotq_s32 when built with dotprod, else vmull/vpadal).
// Every kernel computes the same integers per block (or K-quant super-block); the SIMD paths then
// sum block results in float lanes (on AVX2 one 8-lane FMA accumulator per output, on NEON two
// 4-lane ones for 32-element blocks and a per-super-block reduction for K-quants), which changes
// only the float rounding order (~1e-7 relative).
//
// Q16 activations (act_bits = 16; quantize_act.h) have their own kernel set with the same contract:
// vec_dot_q16_scalar.cpp (reference), vec_dot_q16_avx2.h (AVX2, and AVX512-VNNI vpdpwssd where
// the CPU has it), vec_dot_q16_neon.cpp. Float weights take fp32 activations at either setting.
//
// Prefill: an ISA may also offer a tile kernel (GemmTile, below) computing several rows × tokens
// per call; it must give exactly its vec_dot's bits for every pair (AVX2's vec_dot is its 1×1 tile).
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu_features.h"
#include "quant/types.h"

namespace gaacrt::cpu {

// n: elements in the row (a multiple of the block size); w: n elements of the weight type;
// a: n elements of act_type(weight type). Returns Σ w[i]*a[i] in fp32.
using VecDotFn = float (*)(int64_t n, const void* w, const void* a);

// One kernel per (weight type, ISA); nullptr where that ISA has none (or is not compiled in).
VecDotFn vec_dot_scalar(GGMLType w);
VecDotFn vec_dot_avx2(GGMLType w);  // only on x86 builds; uses AVX512-VNNI where the CPU has it
VecDotFn vec_dot_avx2_without_vnni(GGMLType w);  // the plain-AVX2 kernels, for the tests
VecDotFn vec_dot_neon(GGMLType w);  // only on aarch64 builds

// Against Q16 activations; nullptr for float weights (they take vec_dot_* above) or a missing ISA.
VecDotFn vec_dot_q16_scalar(GGMLType w);
VecDotFn vec_dot_q16_avx2(GGMLType w);  // only on x86 builds; vpdpwssd where the CPU has AVX512-VNNI
VecDotFn vec_dot_q16_avx2_without_vnni(GGMLType w);  // the plain-AVX2 kernels, for the tests
VecDotFn vec_dot_q16_neon(GGMLType w);  // only on aarch64 builds

// The kernel to use for activations of act_bits (8 or 16; quantize_act.h): the ISA's own if it
// has one and this CPU runs it, else the scalar one. Throws Error("quant", "unsupported_type")
// for a type without any kernel, Error("quant", "bad_act_bits") for another act_bits.
VecDotFn vec_dot_fn(GGMLType w, Isa isa, int act_bits = 8);

// A prefill tile: out[t * out_stride + r] = vec_dot(n, w + r * w_stride, a + t * a_stride) for
// r < rows, t < tokens, bit-identical to that ISA's vec_dot for every pair (each weight block is
// decoded once for all the tile's tokens, each activation block loaded once for its rows).
struct GemmTile {
  int rows = 0, tokens = 0;
  void (*fn)(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride, float* out,
             int64_t out_stride) = nullptr;
};
GemmTile gemm_tile_avx2(GGMLType w);  // only on x86 builds; fn == nullptr where there is none
GemmTile gemm_tile_q16_avx2(GGMLType w);  // the same against Q16 activations
// The tile kernel for (weight type, ISA, act_bits), or one with fn == nullptr (matmul then
// loops vec_dot).
GemmTile gemm_tile_fn(GGMLType w, Isa isa, int act_bits = 8);

}  // namespace gaacrt::cpu
