// dequant.h — dequantize one block to fp32 (portable: C++, CUDA and MSL).
//
// Bit-exact with the gguf package's numpy dequantization: every multiply and add is rounded to
// fp32 separately, in numpy's order (e.g. Q4_K is (d*sc)*q - (dmin*mn), not d*(sc*q) - ...).
// Files that include this must be compiled without floating-point contraction
// (-ffp-contract=off), or the compiler may fuse a*b+c into an FMA and change the last bit.
#pragma once
#include "blocks.h"
#include "../common/half.h"

namespace gaacrt {

#define GAACRT_BLOCK(T) const GAACRT_DEVICE T&

GAACRT_HD void dequant_block(GAACRT_BLOCK(block_q4_0) b, GAACRT_THREAD float* y) {
  const float d = fp16_to_f32(b.d);
  for (int j = 0; j < QK4_0 / 2; ++j) {
    y[j] = d * (float)((int)(b.qs[j] & 0xF) - 8);
    y[j + QK4_0 / 2] = d * (float)((int)(b.qs[j] >> 4) - 8);
  }
}

GAACRT_HD void dequant_block(GAACRT_BLOCK(block_q4_1) b, GAACRT_THREAD float* y) {
  const float d = fp16_to_f32(b.d), m = fp16_to_f32(b.m);
  for (int j = 0; j < QK4_1 / 2; ++j) {
    y[j] = d * (float)(b.qs[j] & 0xF) + m;
    y[j + QK4_1 / 2] = d * (float)(b.qs[j] >> 4) + m;
  }
}

GAACRT_HD uint32_t load_u32_le(const GAACRT_DEVICE uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

GAACRT_HD void dequant_block(GAACRT_BLOCK(block_q5_0) b, GAACRT_THREAD float* y) {
  const float d = fp16_to_f32(b.d);
  const uint32_t qh = load_u32_le(b.qh);
  for (int j = 0; j < QK5_0 / 2; ++j) {
    const int x0 = (b.qs[j] & 0xF) | (((qh >> j) & 1u) << 4);
    const int x1 = (b.qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
    y[j] = d * (float)(x0 - 16);
    y[j + QK5_0 / 2] = d * (float)(x1 - 16);
  }
}

GAACRT_HD void dequant_block(GAACRT_BLOCK(block_q5_1) b, GAACRT_THREAD float* y) {
  const float d = fp16_to_f32(b.d), m = fp16_to_f32(b.m);
  const uint32_t qh = load_u32_le(b.qh);
  for (int j = 0; j < QK5_1 / 2; ++j) {
    const int x0 = (b.qs[j] & 0xF) | (((qh >> j) & 1u) << 4);
    const int x1 = (b.qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
    y[j] = d * (float)x0 + m;
    y[j + QK5_1 / 2] = d * (float)x1 + m;
  }
}

GAACRT_HD void dequant_block(GAACRT_BLOCK(block_q8_0) b, GAACRT_THREAD float* y) {
  const float d = fp16_to_f32(b.d);
  for (int j = 0; j < QK8_0; ++j) y[j] = (float)b.qs[j] * d;
}

GAACRT_HD void dequant_block(GAACRT_BLOCK(block_iq4_nl) b, GAACRT_THREAD float* y) {
  const float d = fp16_to_f32(b.d);
  for (int j = 0; j < QK4_NL / 2; ++j) {
    y[j] = d * (float)kvalues_iq4nl(b.qs[j] & 0xF);
    y[j + QK4_NL / 2] = d * (float)kvalues_iq4nl(b.qs[j] >> 4);
  }
}

GAACRT_HD void dequant_block(GAACRT_BLOCK(block_q4_k) b, GAACRT_THREAD float* y) {
  const float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
  for (int c = 0; c < 4; ++c) {  // 64-element chunk c: sub-blocks 2c (low) and 2c+1 (high)
    uint8_t sc0, mn0, sc1, mn1;
    get_scale_min_k4(2 * c, b.scales, sc0, mn0);
    get_scale_min_k4(2 * c + 1, b.scales, sc1, mn1);
    const float d0 = d * (float)sc0, m0 = dmin * (float)mn0;
    const float d1 = d * (float)sc1, m1 = dmin * (float)mn1;
    const GAACRT_DEVICE uint8_t* q = b.qs + 32 * c;
    for (int l = 0; l < 32; ++l) {
      y[64 * c + l] = d0 * (float)(q[l] & 0xF) - m0;
      y[64 * c + 32 + l] = d1 * (float)(q[l] >> 4) - m1;
    }
  }
}

GAACRT_HD void dequant_block(GAACRT_BLOCK(block_q5_k) b, GAACRT_THREAD float* y) {
  const float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
  for (int c = 0; c < 4; ++c) {
    uint8_t sc0, mn0, sc1, mn1;
    get_scale_min_k4(2 * c, b.scales, sc0, mn0);
    get_scale_min_k4(2 * c + 1, b.scales, sc1, mn1);
    const float d0 = d * (float)sc0, m0 = dmin * (float)mn0;
    const float d1 = d * (float)sc1, m1 = dmin * (float)mn1;
    const GAACRT_DEVICE uint8_t* q = b.qs + 32 * c;
    for (int l = 0; l < 32; ++l) {
      const int h0 = (b.qh[l] >> (2 * c)) & 1, h1 = (b.qh[l] >> (2 * c + 1)) & 1;
      y[64 * c + l] = d0 * (float)((q[l] & 0xF) | (h0 << 4)) - m0;
      y[64 * c + 32 + l] = d1 * (float)((q[l] >> 4) | (h1 << 4)) - m1;
    }
  }
}

GAACRT_HD void dequant_block(GAACRT_BLOCK(block_q6_k) b, GAACRT_THREAD float* y) {
  const float d = fp16_to_f32(b.d);
  for (int n = 0; n < 2; ++n) {
    const GAACRT_DEVICE uint8_t* L = b.ql + 64 * n;
    const GAACRT_DEVICE uint8_t* H = b.qh + 32 * n;
    for (int l = 0; l < 32; ++l) {
      const int q0 = (L[l] & 0xF) | (((H[l] >> 0) & 3) << 4);
      const int q1 = (L[l + 32] & 0xF) | (((H[l] >> 2) & 3) << 4);
      const int q2 = (L[l] >> 4) | (((H[l] >> 4) & 3) << 4);
      const int q3 = (L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4);
      const int e = 128 * n + l;
      y[e] = (d * (float)b.scales[e / 16]) * (float)(q0 - 32);
      y[e + 32] = (d * (float)b.scales[(e + 32) / 16]) * (float)(q1 - 32);
      y[e + 64] = (d * (float)b.scales[(e + 64) / 16]) * (float)(q2 - 32);
      y[e + 96] = (d * (float)b.scales[(e + 96) / 16]) * (float)(q3 - 32);
    }
  }
}

// IQ4_XS sub-block scale: (low nibble | two high bits << 4) - 32.
GAACRT_HD int iq4_xs_scale(GAACRT_BLOCK(block_iq4_xs) b, int ib) {
  const int lo = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
  const int hi = (b.scales_h >> (2 * ib)) & 3;
  return (lo | (hi << 4)) - 32;
}

GAACRT_HD void dequant_block(GAACRT_BLOCK(block_iq4_xs) b, GAACRT_THREAD float* y) {
  const float d = fp16_to_f32(b.d);
  for (int ib = 0; ib < QK_K / 32; ++ib) {
    const float dl = d * (float)iq4_xs_scale(b, ib);
    const GAACRT_DEVICE uint8_t* q = b.qs + 16 * ib;
    for (int j = 0; j < 16; ++j) {
      y[32 * ib + j] = dl * (float)kvalues_iq4nl(q[j] & 0xF);
      y[32 * ib + 16 + j] = dl * (float)kvalues_iq4nl(q[j] >> 4);
    }
  }
}

#undef GAACRT_BLOCK

}  // namespace gaacrt
