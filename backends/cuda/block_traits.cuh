// block_traits.cuh — maps a GGMLType to its block struct and runs a functor templated on it,
// so each op writes its kernel once for every weight type.
#pragma once
#include "common/error.h"
#include "quant/blocks.h"
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

}  // namespace gaacrt::cuda
