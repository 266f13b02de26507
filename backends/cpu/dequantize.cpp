// dequantize.cpp — row dequantization: a loop over blocks of the portable dequant_block().
#include "dequantize.h"

#include <cstring>

#include "common/error.h"
#include "common/half.h"
#include "quant/dequant.h"

namespace gaacrt::cpu {
namespace {

template <typename Block, int QK>
void dequant_blocks(const void* src, float* dst, int64_t n) {
  const Block* b = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / QK; ++i) dequant_block(b[i], dst + i * QK);
}

}  // namespace

void dequantize_row(GGMLType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case GGMLType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case GGMLType::F16: {
      const uint16_t* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(h[i]);
      return;
    }
    case GGMLType::BF16: {
      const uint16_t* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    case GGMLType::Q4_0: return dequant_blocks<block_q4_0, QK4_0>(src, dst, n);
    case GGMLType::Q4_1: return dequant_blocks<block_q4_1, QK4_1>(src, dst, n);
    case GGMLType::Q5_0: return dequant_blocks<block_q5_0, QK5_0>(src, dst, n);
    case GGMLType::Q5_1: return dequant_blocks<block_q5_1, QK5_1>(src, dst, n);
    case GGMLType::Q8_0: return dequant_blocks<block_q8_0, QK8_0>(src, dst, n);
    case GGMLType::IQ4_NL: return dequant_blocks<block_iq4_nl, QK4_NL>(src, dst, n);
    case GGMLType::Q4_K: return dequant_blocks<block_q4_k, QK_K>(src, dst, n);
    case GGMLType::Q5_K: return dequant_blocks<block_q5_k, QK_K>(src, dst, n);
    case GGMLType::Q6_K: return dequant_blocks<block_q6_k, QK_K>(src, dst, n);
    case GGMLType::IQ4_XS: return dequant_blocks<block_iq4_xs, QK_K>(src, dst, n);
    default:
      throw Error("quant", "unsupported_type",
                  strfmt("dequantize: tensor type %s is not supported", type_name(type)));
  }
}

}  // namespace gaacrt::cpu
