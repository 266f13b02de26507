// quantize_act.h — fp32 activation rows -> the 8-bit block types the integer dot products eat.
//
// shared/spec/gguf.md §2.7 and §2.9. Each weight type has an activation ("vec_dot") type, as in
// llama.cpp's type_traits_cpu: Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1 (its s = d*Σq
// carries the +m offset), Q8_K for Q4_K/Q5_K/Q6_K/IQ4_XS (fp32 d plus per-16 sums `bsums` for the
// K-quant min term). Float weights (F32/F16/BF16) take the fp32 row as it is.
// The quantizers are bit-for-bit llama.cpp's reference ones (quantize_row_q8_*_ref), so a dot
// product here sees exactly the integers llama.cpp's would.
//
// Q16 (act_bits = 16, gaacrt's own): 8 bits per activation put SmolLM2's logits up to 15-50%
// (relative L2) away from exact math at some positions (llama.cpp measures the same); int16
// with one scale per 32 values brings the matmuls' share of that error below the BF16 KV
// cache's. One Q16 format serves every quantized weight type: its 32-value blocks line up with
// the 32-element blocks and with the K-quants' / IQ4_XS's 32-element sub-blocks (Q6_K's
// 16-element sub-blocks pair up inside one), and its per-block sums carry the +m (Q4_1/Q5_1)
// and -dmin·mn (Q4_K/Q5_K) terms. A row is laid out structure-of-arrays, so that the 8 scales
// of a K-quant super-block are one vector load:
//
//   Q16 row of n values, nb = n/32 blocks (act_row_bytes = nb*8 + 2n bytes):
//     float   d[nb]     block scale, x ≈ d*q; d = amax/32767 (0 for an all-zero block)
//     float   s[nb]     d * Σq over the block (Σq exact in float: |Σq| < 2^21), one rounding
//     int16_t q[n]      q = round-half-even(x * (1/d)), |q| <= 32767
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

// Q16: see above. x: (n,), dst: act_row_bytes(w, n, 16) bytes (n a multiple of 32).
// A block whose largest |x| is below kQ16MinAmax quantizes to zeros (d = 0): below ~1e-34,
// 1/d would overflow to inf, and such values sit 30 orders of magnitude under any activation.
constexpr float kQ16MinAmax = 1e-30f;
void quantize_row_q16(const float* x, void* dst, int64_t n);

// A Q16 row's three arrays (n values).
struct Q16Row {
  const float* d;
  const float* s;
  const int16_t* q;
};
inline Q16Row q16_row(const void* a, int64_t n) {
  const float* d = static_cast<const float*>(a);
  return {d, d + n / 32, reinterpret_cast<const int16_t*>(d + 2 * (n / 32))};
}

// Activation precision of the integer matmuls: 8 (llama.cpp's Q8_0/Q8_1/Q8_K) or 16 (Q16).
// Throws Error("quant", "bad_act_bits") for anything else, naming the value.
void check_act_bits(int act_bits);

// The activation type a weight type is dotted against: Q8_0, Q8_1, Q8_K, or F32 for float weights.
// Throws Error("quant", "unsupported_type") for a type without a matvec kernel.
GGMLType act_type(GGMLType weight_type);

// Bytes of one activation row of n elements for weights of `weight_type` (float weights: n
// floats whatever act_bits says).
size_t act_row_bytes(GGMLType weight_type, int64_t n, int act_bits = 8);

// One activation row: x (n,) -> dst (act_row_bytes bytes).
using QuantizeRowFn = void (*)(const float* x, void* dst, int64_t n);

// SIMD versions of the three quantizers, bit-identical to the scalar ones above for every finite
// input (they find the same max, divide the same way, and round with the same rule); nullptr
// where the ISA has none or is not compiled in. `act` is Q8_0, Q8_1 or Q8_K.
QuantizeRowFn quantize_act_avx2(GGMLType act);  // only on x86 builds
QuantizeRowFn quantize_act_neon(GGMLType act);  // only on aarch64 builds
// The same for Q16, bit-identical to quantize_row_q16 for finite input.
QuantizeRowFn quantize_q16_avx2();  // only on x86 builds
QuantizeRowFn quantize_q16_neon();  // only on aarch64 builds

// The quantizer for weights of `weight_type` on `isa` (scalar where the ISA has none); for float
// weights, a copy of the floats.
QuantizeRowFn quantize_act_fn(GGMLType weight_type, Isa isa, int act_bits = 8);

// x (n,) -> dst (act_row_bytes(weight_type, n, act_bits) bytes) with quantize_act_fn.
void quantize_act_row(GGMLType weight_type, const float* x, void* dst, int64_t n, Isa isa = Isa::Scalar,
                      int act_bits = 8);

}  // namespace gaacrt::cpu
