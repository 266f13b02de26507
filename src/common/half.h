// half.h — IEEE fp16 and bfloat16 <-> fp32 by bit manipulation (portable header).
//
// Written with integer operations only so that every backend produces the same float for the
// same 16 bits, NaN payloads included: the conversion is exact (fp16 and bf16 values are all
// representable in fp32), so there is no rounding to disagree about. The fp32 -> fp16/bf16
// direction rounds to nearest even, as ggml and numpy do.
#pragma once
#include "portable.h"

namespace gaacrt {

GAACRT_HD float bits_to_f32(uint32_t u) {
#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#elif defined(__METAL_VERSION__)
  return as_type<float>(u);
#else
  union { uint32_t u; float f; } c; c.u = u; return c.f;
#endif
}

GAACRT_HD uint32_t f32_to_bits(float f) {
#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#elif defined(__METAL_VERSION__)
  return as_type<uint32_t>(f);
#else
  union { uint32_t u; float f; } c; c.f = f; return c.u;
#endif
}

// fp16 bits -> fp32. Subnormals are normalised; Inf/NaN keep their payload (no quieting),
// which is what numpy's scalar conversion does.
GAACRT_HD float fp16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  if (exp == 0x1Fu) return bits_to_f32(sign | 0x7F800000u | (man << 13));  // Inf / NaN
  if (exp != 0) return bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
  if (man == 0) return bits_to_f32(sign);                                   // +-0
  // Subnormal: value = man * 2^-24. Shift the leading one up to bit 10.
  uint32_t e = 113;  // exponent of 2^-14 is 127-14 = 113
  while ((man & 0x400u) == 0) { man <<= 1; --e; }
  return bits_to_f32(sign | (e << 23) | ((man & 0x3FFu) << 13));
}

// fp32 -> fp16 bits, round to nearest even; overflow to Inf; NaN stays NaN (quiet).
GAACRT_HD uint16_t f32_to_fp16(float f) {
  const uint32_t x = f32_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));  // NaN
  if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  // rounds to >= 65520: Inf
  if (ax < 0x38800000u) {  // below 2^-14: fp16 subnormal or zero
    if (ax < 0x33000000u) return (uint16_t)sign;  // below half of the smallest subnormal
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 113 - e + 13
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return (uint16_t)(sign | r);
  }
  uint32_t r = ((ax - 0x38000000u) >> 13);  // rebias 127 -> 15
  const uint32_t rem = ax & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return (uint16_t)(sign | r);
}

GAACRT_HD float bf16_to_f32(uint16_t b) { return bits_to_f32((uint32_t)b << 16); }

// fp32 -> bf16 bits as ggml_compute_fp32_to_bf16: NaN forced quiet, else round to nearest even.
GAACRT_HD uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_to_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 64u);
  return (uint16_t)((x + (0x7FFFu + ((x >> 16) & 1u))) >> 16);
}

}  // namespace gaacrt
