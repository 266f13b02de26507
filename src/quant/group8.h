// group8.h — the "group of eight" weight layout: GGUF's Q4_0, Q8_0 and Q6_K blocks regrouped so
// that a GPU reads their quant bytes with aligned 8- and 16-byte loads (portable: C++, CUDA, MSL).
//
// A Q4_0 block is 18 bytes (fp16 d, then 16 bytes of nibbles), so in a GGUF row its quant bytes
// sit at 2-byte alignment and a GPU must read them 2 bytes at a time (Q6_K's 210-byte blocks
// likewise): five loads per lane per Q4_0 block, each warp load spread over three cache lines.
// On the H200 those many narrow loads, not DRAM, bound the decode matrix-vector product.
// Regrouping eight consecutive blocks of a row field by field — the eight values of the first
// field, then of the second, ... — keeps the row's size and its bytes' range, and puts every
// field of every block on an aligned boundary:
//
//   GGUF   | d0 qs0 | d1 qs1 | ... | d7 qs7 |          8 x 18 bytes
//   group  | d0 d1 ... d7 | qs0 | qs1 | ... | qs7 |   16 + 8 x 16 bytes (qs 16-aligned)
//   Q6_K   | d0..d7 (16) | scales0..7 (128) | ql0..7 (1024) | qh0..7 (512) |   8 x 210 bytes
//
// Block b of a row lives in group b / 8, at slot b % 8. Only rows of a multiple of 8 blocks are
// regrouped, and a backend chooses it (Backend::place_weight; WeightView::layout says which layout
// a view has). The blocks' contents are unchanged, so dequantizing a regrouped block gives the
// same bits.
#pragma once
#include "../common/portable.h"
#include "blocks.h"

namespace gaacrt {

constexpr int kGroup8 = 8;

// A field of a block: its byte offset in the GGUF block and its size.
struct Group8Field {
  uint32_t off, size;
};

// The block types the layout applies to, with their fields in group order (each field's eight
// copies are a multiple of 16 bytes, so every field of a group starts 16-aligned); kQuantField is
// the field holding most of a block's bytes.
template <typename B>
struct Group8Traits;
template <>
struct Group8Traits<block_q4_0> {
  static constexpr int kFields = 2, kQuantField = 1;  // d, qs
  static constexpr Group8Field field(int f) { return f == 0 ? Group8Field{0, 2} : Group8Field{2, 16}; }
};
template <>
struct Group8Traits<block_q8_0> {
  static constexpr int kFields = 2, kQuantField = 1;  // d, qs
  static constexpr Group8Field field(int f) { return f == 0 ? Group8Field{0, 2} : Group8Field{2, 32}; }
};
template <>
struct Group8Traits<block_q6_k> {
  static constexpr int kFields = 4, kQuantField = 2;  // d, scales, ql, qh
  static constexpr Group8Field field(int f) {
    return f == 0 ? Group8Field{208, 2} : f == 1 ? Group8Field{192, 16} : f == 2 ? Group8Field{0, 128} : Group8Field{128, 64};
  }
};

// Byte offset, from the start of its row, of field f of block b. (A row is far below 4 GiB, so
// 32 bits hold any offset in it.)
// The fields before f are summed without a loop (at most four fields): with f a constant, as in
// every kernel's call, it folds to one constant (nvcc kept a loop of ~10 instructions a field for
// Q6_K's fields 2 and 3, run for every piece the decode matvec loads).
template <typename B>
GAACRT_HD uint32_t group8_field_offset(int f, uint32_t b) {
  static_assert(Group8Traits<B>::kFields <= 4, "the sum below covers fields 0..2");
  using T = Group8Traits<B>;
  const uint32_t before =
      (f > 0 ? T::field(0).size : 0u) + (f > 1 ? T::field(1).size : 0u) + (f > 2 ? T::field(2).size : 0u);
  return (b / kGroup8) * (kGroup8 * (uint32_t)sizeof(B)) + kGroup8 * before + T::field(f).size * (b % kGroup8);
}

// Copies block b of a GGUF row to its place in the regrouped row (the backend's upload kernel
// runs it once per block; the host tests use it to build regrouped rows).
template <typename B>
GAACRT_HD void group8_place_block(const GAACRT_DEVICE uint8_t* gguf_row, GAACRT_DEVICE uint8_t* group8_row, uint32_t b) {
  const GAACRT_DEVICE uint8_t* src = gguf_row + b * (uint32_t)sizeof(B);
  for (int f = 0; f < Group8Traits<B>::kFields; ++f) {
    const Group8Field fld = Group8Traits<B>::field(f);
    GAACRT_DEVICE uint8_t* dst = group8_row + group8_field_offset<B>(f, b);
    for (uint32_t i = 0; i < fld.size; ++i) dst[i] = src[fld.off + i];
  }
}

// Copies block b of a regrouped row back into GGUF order (gguf_block: sizeof(B) bytes).
template <typename B>
GAACRT_HD void group8_read_block(const GAACRT_DEVICE uint8_t* group8_row, GAACRT_THREAD uint8_t* gguf_block, uint32_t b) {
  for (int f = 0; f < Group8Traits<B>::kFields; ++f) {
    const Group8Field fld = Group8Traits<B>::field(f);
    const GAACRT_DEVICE uint8_t* src = group8_row + group8_field_offset<B>(f, b);
    for (uint32_t i = 0; i < fld.size; ++i) gguf_block[fld.off + i] = src[i];
  }
}

static_assert(sizeof(block_q4_0) == 18 && sizeof(block_q8_0) == 34 && sizeof(block_q6_k) == 210,
              "the fields above cover each block exactly");

}  // namespace gaacrt
