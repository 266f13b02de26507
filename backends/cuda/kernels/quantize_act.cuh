// quantize_act.cuh — one activation value's quantization per 32-value block, the CPU backend's
// arithmetic (backends/cpu/quantize_act.cpp), for every int8 path (matvec_q8.cu, matmul_q8mma.cu).
#pragma once
#include <cuda_fp16.h>

namespace gaacrt::cuda {

// The scale d of a block whose largest magnitude is amax, and v's integer q. 16 bits,
// quantize_row_q16's bits: d = amax / 32767 (0 below kQ16MinAmax = 1e-30), q = round-half-even(v ·
// (1 / d)) clamped to ±32767. 8 bits, quantize_block32's (llama.cpp's Q8_0 / Q8_1): d = amax /
// 127, q = round-half-away(v · (1 / d)).
template <bool kQ16>
__device__ __forceinline__ int quantize_value(float v, float amax, float& d) {
  if constexpr (kQ16) {
    d = amax >= 1e-30f ? amax / 32767.0f : 0.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const int q = __float2int_rn(v * id);
    return q < -32767 ? -32767 : (q > 32767 ? 32767 : q);
  } else {
    d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    return (int)roundf(v * id);
  }
}

// The block's stored scales from d and Σq: 16 bits keeps them in fp32 (Q16's d and s); 8 bits rounds
// them to fp16 as the CPU's Q8_0 / Q8_1 blocks store them (d, and s = fp16(Σq · d)), so that for
// weights whose CPU activations are Q8_0 / Q8_1 (the 32-value types) both backends dot the very
// same integers and scales. (K-quants take Q8_K on the CPU, a scale per 256 values: the same
// precision, other integers.)
// Σq itself is kept too (xn), exact, for the weights whose offset the dot product takes off per
// block (matvec_q8.cu, PieceOffset).
template <bool kQ16>
__device__ __forceinline__ void stored_scales(float d, int sum, float* xd, float* xs, int32_t* xn) {
  *xn = sum;
  if constexpr (kQ16) {
    *xd = d;
    *xs = d * (float)sum;
  } else {
    *xd = __half2float(__float2half_rn(d));
    *xs = __half2float(__float2half_rn((float)sum * d));
  }
}

}  // namespace gaacrt::cuda
