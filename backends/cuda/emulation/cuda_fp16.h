// cuda_fp16.h — the CUDA emulation's stand-in (cuda_emu.h): __half and __half2 with the
// conversions the kernels use, rounding to nearest even as the hardware does (common/half.h).
#pragma once
#include "common/half.h"
#include "cuda_emu.h"

struct __half {
  uint16_t x_;
};
struct alignas(4) __half2 {
  __half x, y;
};
inline __half __float2half_rn(float f) { return __half{gaacrt::f32_to_fp16(f)}; }
inline float __half2float(__half h) { return gaacrt::fp16_to_f32(h.x_); }
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
inline unsigned short __half_as_ushort(__half h) { return h.x_; }
inline __half2 __floats2half2_rn(float a, float b) { return __half2{__float2half_rn(a), __float2half_rn(b)}; }
inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }
inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
// fp16 arithmetic: the exact result rounded once (fp32 holds the sum or difference of two fp16
// values whose exponents differ by less than 13, the products always; wider gaps round twice).
inline __half2 __hsub2(__half2 a, __half2 b) {
  return __floats2half2_rn(__half2float(a.x) - __half2float(b.x), __half2float(a.y) - __half2float(b.y));
}
inline __half2 __hadd2(__half2 a, __half2 b) {
  return __floats2half2_rn(__half2float(a.x) + __half2float(b.x), __half2float(a.y) + __half2float(b.y));
}
inline __half2 __hmul2(__half2 a, __half2 b) {
  return __floats2half2_rn(__half2float(a.x) * __half2float(b.x), __half2float(a.y) * __half2float(b.y));
}
