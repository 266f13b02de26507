// quantize_act.cuh — one activation value's quantization per 32-value block, the CPU backend's
// arithmetic (backends/cpu/quantize_act.cpp), for every int8 path (matvec_q8.cu, matmul_q8mma.cu).
#pragma once

namespace gaacrt::cuda {

// The scale d of a block whose largest magnitude is amax, and v's integer q. 16 bits,
// quantize_row_q16's bits: d = amax / 32767 (0 below kQ16MinAmax = 1e-30), q = round-half-even(v ·
// (1 / d)) clamped to ±32767. 8 bits (llama.cpp's q8 rounding): d = amax / 127, q = round(v / d).
template <bool kQ16>
__device__ __forceinline__ int quantize_value(float v, float amax, float& d) {
  if constexpr (kQ16) {
    d = amax >= 1e-30f ? amax / 32767.0f : 0.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const int q = __float2int_rn(v * id);
    return q < -32767 ? -32767 : (q > 32767 ? 32767 : q);
  } else {
    d = amax / 127.f;
    return d > 0.f ? __float2int_rn(v / d) : 0;
  }
}

}  // namespace gaacrt::cuda
