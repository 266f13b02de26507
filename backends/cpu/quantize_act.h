// quantize_act.h — fp32 activation rows -> the 8-bit block types the integer dot products eat.
//
// shared/spec/gguf.md §2.7 and §2.9. Each weight type has an activation ("vec_dot") type, as in
// llama.cpp's type_traits_cpu: Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1 (its s = d*Σq
// carries the +m offset), Q8_K for Q4_K/Q5_K/Q6_K/IQ4_XS (fp32 d plus per-16 sums `bsums` for the
// K-quant min term). Float weights (F32/F16/BF16) take the fp32 row as it is.
// The quantizers are bit-for-bit llama.cpp's reference ones (quantize_row_q8_*_ref), so a dot
// product here sees exactly the integers llama.cpp's would.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu_features.h"
#include "quant/blocks.h"
#include "quant/types.h"

namespace gaacrt::cpu {

// Q8_0: d = amax/127 (stored fp16), q = roundf(x * (1/d)) — round half away from zero.
void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n);  // x: (n,), y: (n/32,)
// Q8_1: as Q8_0, plus s = fp16(d * Σq).
void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t n);  // x: (n,), y: (n/32,)
// Q8_K: max = the signed value of largest |x|, iscale = -127/max, q = min(127, nearest_int(iscale*x))
// (round half to even, via the 1.5*2^23 trick), d = 1/iscale in fp32, bsums[k] = Σ q[16k..16k+15].
void quantize_row_q8_k(const float* x, block_q8_k* y, int64_t n);  // x: (n,), y: (n/256,)

// The activation type a weight type is dotted against: Q8_0, Q8_1, Q8_K, or F32 for float weights.
// Throws Error("quant", "unsupported_type") for a type without a matvec kernel.
GGMLType act_type(GGMLType weight_type);

// Bytes of one activation row of n elements for weights of `weight_type`.
size_t act_row_bytes(GGMLType weight_type, int64_t n);

// One activation row: x (n,) -> dst (act_row_bytes bytes).
using QuantizeRowFn = void (*)(const float* x, void* dst, int64_t n);

// SIMD versions of the three quantizers, bit-identical to the scalar ones above for every finite
// input (they find the same max, divide the same way, and round with the same rule); nullptr
// where the ISA has none or is not compiled in. `act` is Q8_0, Q8_1 or Q8_K.
QuantizeRowFn quantize_act_avx2(GGMLType act);  // only on x86 builds
QuantizeRowFn quantize_act_neon(GGMLType act);  // only on aarch64 builds

// The quantizer for weights of `weight_type` on `isa` (scalar where the ISA has none); for float
// weights, a copy of the floats.
QuantizeRowFn quantize_act_fn(GGMLType weight_type, Isa isa);

// x (n,) -> dst (act_row_bytes(weight_type, n) bytes) with quantize_act_fn(weight_type, isa).
void quantize_act_row(GGMLType weight_type, const float* x, void* dst, int64_t n, Isa isa = Isa::Scalar);

}  // namespace gaacrt::cpu
