// blocks.h — GGUF weight block layouts (portable: C++, CUDA and MSL include this file).
//
// Every struct is the exact byte image of one block in a GGUF file (ggml-common.h layouts,
// restated in shared/spec/gguf.md §2). Scales are IEEE fp16 stored as raw bits (uint16_t) so
// that the struct means the same thing on every compiler; convert with fp16_to_f32().
// Blocks run along ne[0] (the contiguous dimension); a row of K elements is K/QK blocks.
#pragma once
#include "../common/portable.h"

namespace gaacrt {

constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK8_1 = 32;
constexpr int QK4_NL = 32;
constexpr int QK_K = 256;        // super-block of the K-quants and IQ4_XS
constexpr int K_SCALE_SIZE = 12; // packed 6-bit scales+mins of Q4_K / Q5_K

// Q4_0, 18 bytes, x = d * (q - 8)
//  0      2                                  18
//  | d f16| qs[16]: byte j = q[j] | q[j+16]<<4 |
struct block_q4_0 { uint16_t d; uint8_t qs[QK4_0 / 2]; };

// Q4_1, 20 bytes, x = d * q + m (m is the block minimum, added)
//  0      2      4                           20
//  | d f16| m f16| qs[16] (same nibble order)  |
struct block_q4_1 { uint16_t d; uint16_t m; uint8_t qs[QK4_1 / 2]; };

// Q5_0, 22 bytes, x = d * (q - 16), q = low nibble | bit j of qh << 4
//  0      2          6                       22
//  | d f16| qh[4] u32| qs[16]                  |
struct block_q5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; };

// Q5_1, 24 bytes, x = d * q + m
//  0      2      4          8                24
//  | d f16| m f16| qh[4] u32| qs[16]           |
struct block_q5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; };

// Q8_0, 34 bytes, x = d * q (also the activation type for Q4_0/Q5_0/Q8_0/IQ4_NL dot products)
//  0      2                                  34
//  | d f16| qs[32] int8                        |
struct block_q8_0 { uint16_t d; int8_t qs[QK8_0]; };

// Q8_1, 36 bytes (activations only): s = d * sum(q), used for the +m / -8 offsets of Q4_1/Q5_1
//  0      2      4                           36
//  | d f16| s f16| qs[32] int8                 |
struct block_q8_1 { uint16_t d; uint16_t s; int8_t qs[QK8_1]; };

// IQ4_NL, 18 bytes, x = d * kvalues_iq4nl[q] (q: 4-bit index, Q4_0 nibble order)
struct block_iq4_nl { uint16_t d; uint8_t qs[QK4_NL / 2]; };

// Q4_K, 144 bytes. 8 sub-blocks of 32, each with a 6-bit scale sc and 6-bit min mn:
//   x = (d * sc) * q - (dmin * mn)
//  0      2        4              16                                  144
//  | d f16| dmin f16| scales[12]   | qs[128]: 64-byte chunk c holds sub-block 2c (low
//                                  |   nibbles) and 2c+1 (high nibbles)   |
// scales[12] packing (get_scale_min_k4): for j<4 sc=s[j]&63, mn=s[j+4]&63; for j>=4
//   sc = (s[j+4]&0xF) | (s[j-4]>>6)<<4, mn = (s[j+4]>>4) | (s[j]>>6)<<4.
struct block_q4_k { uint16_t d; uint16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; };

// Q5_K, 176 bytes: Q4_K plus the fifth bit; bit (2c or 2c+1) of qh[l] is the high bit of
// element l of sub-block (2c or 2c+1).
//  0      2        4           16         48                          176
//  | d f16| dmin f16| scales[12]| qh[32]   | qs[128]                    |
struct block_q5_k { uint16_t d; uint16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; };

// Q6_K, 210 bytes, 16 sub-blocks of 16 with int8 scales: x = (d * scales[e/16]) * (q - 32)
//  0                128              192              208     210
//  | ql[128] low 4b  | qh[64] high 2b  | scales[16] i8   | d f16 |
// For half n (0,1), l in 0..31: L = ql+64n, H = qh+32n
//   e=128n+l    : L[l]&0xF    | ((H[l]>>0)&3)<<4      e=128n+l+64: L[l]>>4    | ((H[l]>>4)&3)<<4
//   e=128n+l+32 : L[l+32]&0xF | ((H[l]>>2)&3)<<4      e=128n+l+96: L[l+32]>>4 | ((H[l]>>6)&3)<<4
struct block_q6_k { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; };

// IQ4_XS, 136 bytes, 8 sub-blocks of 32: ls = (low4 | high2<<4) - 32, x = (d * ls) * kvalues[q]
//  0      2            4           8                                   136
//  | d f16| scales_h u16| scales_l[4]| qs[128]: 16 bytes per sub-block, Q4_0 nibble order |
struct block_iq4_xs { uint16_t d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; };

// Q8_K, 292 bytes (CPU activations only): d is fp32 and bsums[k] = sum of qs[16k..16k+15]
struct block_q8_k { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; };

GAACRT_STATIC_ASSERT(sizeof(block_q4_0) == 18, "q4_0 size");
GAACRT_STATIC_ASSERT(sizeof(block_q4_1) == 20, "q4_1 size");
GAACRT_STATIC_ASSERT(sizeof(block_q5_0) == 22, "q5_0 size");
GAACRT_STATIC_ASSERT(sizeof(block_q5_1) == 24, "q5_1 size");
GAACRT_STATIC_ASSERT(sizeof(block_q8_0) == 34, "q8_0 size");
GAACRT_STATIC_ASSERT(sizeof(block_q8_1) == 36, "q8_1 size");
GAACRT_STATIC_ASSERT(sizeof(block_iq4_nl) == 18, "iq4_nl size");
GAACRT_STATIC_ASSERT(sizeof(block_q4_k) == 144, "q4_k size");
GAACRT_STATIC_ASSERT(sizeof(block_q5_k) == 176, "q5_k size");
GAACRT_STATIC_ASSERT(sizeof(block_q6_k) == 210, "q6_k size");
GAACRT_STATIC_ASSERT(sizeof(block_iq4_xs) == 136, "iq4_xs size");
GAACRT_STATIC_ASSERT(sizeof(block_q8_k) == 292, "q8_k size");

// The non-linear 4-bit grid shared by IQ4_NL and IQ4_XS.
// (A local table, not a namespace-scope array: CUDA and MSL each want their own address space
// for globals; fast kernels keep their own copy in shared/threadgroup memory.)
GAACRT_HD int8_t kvalues_iq4nl(int i) {
  const int8_t t[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return t[i & 15];
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the packed 12 bytes.
GAACRT_HD void get_scale_min_k4(int j, const GAACRT_DEVICE uint8_t* q, uint8_t& sc, uint8_t& mn) {
  if (j < 4) {
    sc = q[j] & 63; mn = q[j + 4] & 63;
  } else {
    sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace gaacrt
