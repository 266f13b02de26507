// block_traits.cuh — maps a GGMLType to its block struct and runs a functor templated on it,
// so each op writes its kernel once for every weight type.
#pragma once
#include "backend/backend.h"
#include "common/error.h"
#include "quant/blocks.h"
#include "quant/group8.h"
#include "quant/types.h"

namespace gaacrt::cuda {

template <typename B, int QK>
struct BlockType { using block = B; static constexpr int qk = QK; };

// Calls f(BlockType<...>{}) for the quantized types; returns false for float/unsupported types.
template <typename F>
bool dispatch_block_type(GGMLType t, F&& f) {
  switch (t) {
    case GGMLType::Q4_0: f(BlockType<block_q4_0, QK4_0>{}); return true;
    case GGMLType::Q4_1: f(BlockType<block_q4_1, QK4_1>{}); return true;
    case GGMLType::Q5_0: f(BlockType<block_q5_0, QK5_0>{}); return true;
    case GGMLType::Q5_1: f(BlockType<block_q5_1, QK5_1>{}); return true;
    case GGMLType::Q8_0: f(BlockType<block_q8_0, QK8_0>{}); return true;
    case GGMLType::IQ4_NL: f(BlockType<block_iq4_nl, QK4_NL>{}); return true;
    case GGMLType::Q4_K: f(BlockType<block_q4_k, QK_K>{}); return true;
    case GGMLType::Q5_K: f(BlockType<block_q5_k, QK_K>{}); return true;
    case GGMLType::Q6_K: f(BlockType<block_q6_k, QK_K>{}); return true;
    case GGMLType::IQ4_XS: f(BlockType<block_iq4_xs, QK_K>{}); return true;
    default: return false;
  }
}

// A block type stored in the group-of-eight layout (quant/group8.h): a tag the kernels are
// instantiated with, the same size as B, never dereferenced (StoredBlock::at assembles a B).
template <typename B>
struct Group8 {
  uint8_t bytes[sizeof(B)];
};

// Block b of a row, as the GGUF struct, whatever the layout: the generic kernels (dequantize,
// get_rows, the reference matmul) read blocks through this.
template <typename Block>
struct StoredBlock {
  using block = Block;
  __device__ static Block at(const uint8_t* row, int64_t b) { return reinterpret_cast<const Block*>(row)[b]; }
};
template <typename B>
struct StoredBlock<Group8<B>> {
  using block = B;
  __device__ static B at(const uint8_t* row, int64_t b) {
    B out;
    group8_read_block<B>(row, reinterpret_cast<uint8_t*>(&out), (uint32_t)b);
    return out;
  }
};

// Calls f(BlockType<Group8<B>, QK>{}) for the types the group-of-eight layout applies to (the
// Group8Traits of quant/group8.h: Q4_0, Q8_0, Q6_K); returns false for the others.
template <typename F>
bool dispatch_group8_type(GGMLType t, F&& f) {
  switch (t) {
    case GGMLType::Q4_0: f(BlockType<Group8<block_q4_0>, QK4_0>{}); return true;
    case GGMLType::Q8_0: f(BlockType<Group8<block_q8_0>, QK8_0>{}); return true;
    case GGMLType::Q6_K: f(BlockType<Group8<block_q6_k>, QK_K>{}); return true;
    default: return false;
  }
}

// True when `t` can be stored as Group8: one of its types, rows of whole groups.
inline bool group8_eligible(GGMLType t, int64_t n_cols) {
  bool whole = false;
  return dispatch_group8_type(t, [&](auto bt) { whole = n_cols % (decltype(bt)::qk * kGroup8) == 0; }) && whole;
}

// dispatch_block_type for a weight view: its Group8 layout is its own block type.
template <typename F>
bool dispatch_weight(const WeightView& w, F&& f) {
  if (w.layout != WeightLayout::Group8) return dispatch_block_type(w.type, f);
  if (!dispatch_group8_type(w.type, f))
    throw Error("backend", "invalid_argument", strfmt("cuda: a %s weight in the group-of-eight layout", type_name(w.type)));
  return true;
}

}  // namespace gaacrt::cuda
