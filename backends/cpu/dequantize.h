// dequantize.h — CPU row dequantization of every supported weight type to fp32.
#pragma once
#include <cstdint>

#include "quant/types.h"

namespace gaacrt::cpu {

// Dequantize `n` elements (a multiple of the type's block size) starting at `src`.
// Bit-identical to gguf.quants.dequantize. Throws Error("quant", "unsupported_type") otherwise.
void dequantize_row(GGMLType type, const void* src, float* dst, int64_t n);

}  // namespace gaacrt::cpu
