// weights.h — reading a weight row 32 elements ("a sub-block") at a time, for every weight type
// the model loader accepts. One loader per type, all with the same face:
//   L::load32(row, k, n_cols, y): y[0..32) = elements 32k .. 32k+31 of the row (0 past n_cols).
// Dequantization is bit-identical to the CPU's and the gguf package's: the 32-element block types
// call the portable dequant_block (src/quant/dequant.h) as is; the 256-element K-quants and IQ4_XS
// decode one sub-block with exactly dequant.h's operations in its order (a GPU lane should not
// hold a whole 256-value super-block), which the dequantize kernel's bit-exact tests check.
#pragma once
#include "common.h"
#include "metal/kernels/args.h"
#include "quant/dequant.h"

namespace gaacrt {
namespace mtl {

// ---- one sub-block of a block --------------------------------------------------------------------
template <typename B>
struct Sub32 {  // the 32-element types: a sub-block is the whole block
  static constexpr uint32_t SUBS = 1;
  static void load(const device B& b, uint32_t, thread float* y) { dequant_block(b, y); }
};

// Q4_K / Q5_K: sub-block s lies in 64-element chunk s/2, low nibbles for even s, high for odd.
template <>
struct Sub32<block_q4_k> {
  static constexpr uint32_t SUBS = 8;
  static void load(const device block_q4_k& b, uint32_t s, thread float* y) {
    uint8_t sc, mn;
    get_scale_min_k4((int)s, b.scales, sc, mn);
    const float d = fp16_to_f32(b.d) * (float)sc, m = fp16_to_f32(b.dmin) * (float)mn;
    const device uint8_t* q = b.qs + 32 * (s / 2);
    const uint32_t shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) y[l] = d * (float)((q[l] >> shift) & 0xF) - m;
  }
};
template <>
struct Sub32<block_q5_k> {
  static constexpr uint32_t SUBS = 8;
  static void load(const device block_q5_k& b, uint32_t s, thread float* y) {
    uint8_t sc, mn;
    get_scale_min_k4((int)s, b.scales, sc, mn);
    const float d = fp16_to_f32(b.d) * (float)sc, m = fp16_to_f32(b.dmin) * (float)mn;
    const device uint8_t* q = b.qs + 32 * (s / 2);
    const uint32_t shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) {
      const int h = (b.qh[l] >> s) & 1;  // bit s of qh[l]: the high bit of element l of sub-block s
      y[l] = d * (float)(((q[l] >> shift) & 0xF) | (h << 4)) - m;
    }
  }
};
// Q6_K: sub-block s = 4n + k covers elements 128n + 32k + l; k picks the nibble and the two qh bits
// (blocks.h draws the layout).
template <>
struct Sub32<block_q6_k> {
  static constexpr uint32_t SUBS = 8;
  static void load(const device block_q6_k& b, uint32_t s, thread float* y) {
    const float d = fp16_to_f32(b.d);
    const uint32_t n = s / 4, k = s % 4;
    const device uint8_t* L = b.ql + 64 * n + 32 * (k % 2);
    const device uint8_t* H = b.qh + 32 * n;
    const uint32_t lshift = 4 * (k / 2), hshift = 2 * k;
    for (int l = 0; l < 32; ++l) {
      const int q = ((L[l] >> lshift) & 0xF) | (((H[l] >> hshift) & 3) << 4);
      const uint32_t e = 128 * n + 32 * k + (uint32_t)l;
      y[l] = (d * (float)b.scales[e / 16]) * (float)(q - 32);
    }
  }
};
template <>
struct Sub32<block_iq4_xs> {
  static constexpr uint32_t SUBS = 8;
  static void load(const device block_iq4_xs& b, uint32_t s, thread float* y) {
    const float dl = fp16_to_f32(b.d) * (float)iq4_xs_scale(b, (int)s);
    const device uint8_t* q = b.qs + 16 * s;
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * (float)kvalues_iq4nl(q[j] & 0xF);
      y[j + 16] = dl * (float)kvalues_iq4nl(q[j] >> 4);
    }
  }
};

// ---- row loaders -----------------------------------------------------------------------------------
template <typename B>
struct QuantRow {
  static void load32(const device uint8_t* row, uint32_t k, uint32_t, thread float* y) {
    const device B* blocks = (const device B*)row;
    Sub32<B>::load(blocks[k / Sub32<B>::SUBS], k % Sub32<B>::SUBS, y);
  }
};

struct F32Elem {
  static float get(const device uint8_t* row, uint32_t i) { return ((const device float*)row)[i]; }
};
struct F16Elem {
  static float get(const device uint8_t* row, uint32_t i) { return fp16_to_f32(((const device uint16_t*)row)[i]); }
};
struct BF16Elem {
  static float get(const device uint8_t* row, uint32_t i) { return bf16_to_f32(((const device uint16_t*)row)[i]); }
};
template <typename E>
struct FloatRow {
  static void load32(const device uint8_t* row, uint32_t k, uint32_t n_cols, thread float* y) {
    for (uint32_t j = 0; j < SUB; ++j) y[j] = SUB * k + j < n_cols ? E::get(row, SUB * k + j) : 0.0f;
  }
};

}  // namespace mtl
}  // namespace gaacrt
