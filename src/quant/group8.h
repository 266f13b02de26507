// group8.h — the "group of eight" weight layout: GGUF's Q4_0 and Q8_0 blocks regrouped so that a
// GPU reads their quant bytes with aligned 16-byte loads (portable: C++, CUDA and MSL).
//
// A Q4_0 block is 18 bytes (fp16 d, then 16 bytes of nibbles), so in a GGUF row its quant bytes
// sit at 2-byte alignment and a GPU must read them 2 bytes at a time: five loads per lane per
// block, each warp load spread over three cache lines. On the H200 that load traffic through the
// L1, not DRAM, bounds the decode matrix-vector product. Regrouping eight consecutive blocks of a
// row as their eight scales, then their eight quant arrays, keeps the row's size and its bytes'
// range, and puts every quant array on a 16-byte boundary:
//
//   GGUF  | d0 qs0 | d1 qs1 | ... | d7 qs7 |           8 x (2 + P) bytes
//   group | d0 d1 ... d7 | qs0 | qs1 | ... | qs7 |    16 + 8 P bytes (P = 16 for Q4_0, 32 for Q8_0)
//
// Block b of a row lives in group b / 8, at slot b % 8. Only rows of a multiple of 8 blocks are
// regrouped (n_cols % 256 == 0), and a backend chooses it (Backend::place_weight; WeightView::layout
// says which layout a view has). The blocks' contents are unchanged, so dequantizing a regrouped
// block gives the same bits.
#pragma once
#include "../common/portable.h"
#include "blocks.h"

namespace gaacrt {

constexpr int kGroup8 = 8;

// Block types with an fp16 scale at byte 0 followed by a 16-byte-multiple payload: the ones this
// layout applies to.
template <typename B>
struct Group8Traits;
template <>
struct Group8Traits<block_q4_0> { static constexpr int kPayload = QK4_0 / 2; };
template <>
struct Group8Traits<block_q8_0> { static constexpr int kPayload = QK8_0; };

// Byte offsets of block b's scale and payload from the start of its row.
// (A row is far below 4 GiB, so 32 bits hold any offset in it.)
template <typename B>
GAACRT_HD uint32_t group8_scale_offset(uint32_t b) {
  return (b / kGroup8) * (kGroup8 * (uint32_t)sizeof(B)) + 2 * (b % kGroup8);
}
template <typename B>
GAACRT_HD uint32_t group8_payload_offset(uint32_t b) {
  return (b / kGroup8) * (kGroup8 * (uint32_t)sizeof(B)) + 2 * kGroup8 + Group8Traits<B>::kPayload * (b % kGroup8);
}

// Copies block b of a GGUF row to its place in the regrouped row (the backend's upload kernel
// runs it once per block; the host tests use it to build regrouped rows).
template <typename B>
GAACRT_HD void group8_place_block(const GAACRT_DEVICE uint8_t* gguf_row, GAACRT_DEVICE uint8_t* group8_row, uint32_t b) {
  const GAACRT_DEVICE uint8_t* src = gguf_row + b * (uint32_t)sizeof(B);
  GAACRT_DEVICE uint8_t* scale = group8_row + group8_scale_offset<B>(b);
  GAACRT_DEVICE uint8_t* payload = group8_row + group8_payload_offset<B>(b);
  scale[0] = src[0];
  scale[1] = src[1];
  for (int i = 0; i < Group8Traits<B>::kPayload; ++i) payload[i] = src[2 + i];
}

static_assert(sizeof(block_q4_0) == 2 + Group8Traits<block_q4_0>::kPayload, "Q4_0: fp16 scale + payload");
static_assert(sizeof(block_q8_0) == 2 + Group8Traits<block_q8_0>::kPayload, "Q8_0: fp16 scale + payload");
static_assert((kGroup8 * sizeof(block_q4_0)) % 16 == 0 && (kGroup8 * sizeof(block_q8_0)) % 16 == 0,
              "a group is a whole number of 16-byte units, so every group starts 16-aligned");

}  // namespace gaacrt
