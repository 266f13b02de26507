// cuda_bf16.h — the CUDA emulation's stand-in (cuda_emu.h): __nv_bfloat16 and __nv_bfloat162,
// rounding to nearest even (common/half.h).
#pragma once
#include "common/half.h"
#include "cuda_emu.h"
#include "cuda_fp16.h"

struct __nv_bfloat16 {
  uint16_t x_;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16{gaacrt::f32_to_bf16(f)}; }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return gaacrt::bf16_to_f32(b.x_); }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__float2bfloat16(a), __float2bfloat16(b)};
}
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{__bfloat162float(h.x), __bfloat162float(h.y)}; }
