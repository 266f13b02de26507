// dequantize.h — whole rows of a weight matrix to fp32 (dequantize) and embedding lookup
// (get_rows): one thread per 32-element sub-block. Bit-identical to backends/cpu/dequantize.cpp.
#pragma once
#include "metal/kernels/weights.h"

namespace gaacrt {
namespace mtl {

template <typename L>
inline void rows_sub(constant RowsArgs& a, const device uint8_t* src, uint32_t k, device float* dst) {
  float y[SUB];
  L::load32(src, k, a.n_cols, y);
  const uint32_t n = a.n_cols - SUB * k < SUB ? a.n_cols - SUB * k : SUB;
  for (uint32_t j = 0; j < n; ++j) dst[SUB * k + j] = a.scale != 1.0f ? y[j] * a.scale : y[j];
}

// out(n_rows, n_cols) = dequantize(w)
template <typename L>
kernel void dequantize(constant RowsArgs& a [[buffer(0)]], device const uint8_t* w [[buffer(1)]],
                       device float* out [[buffer(2)]], GAACRT_POSITIONS) {
  const uint32_t id = tgpig.x * ROWS_THREADS + tiitg;
  if (id >= a.n_rows * a.n_sub) return;
  const uint32_t r = id / a.n_sub, k = id % a.n_sub;
  rows_sub<L>(a, w + (uint64_t)r * a.row_stride, k, out + (uint64_t)r * a.n_cols);
}

// out(n, n_cols) = rows ids[0..n) of w, dequantized, times a.scale
template <typename L>
kernel void get_rows(constant RowsArgs& a [[buffer(0)]], device const uint8_t* w [[buffer(1)]],
                     device const int32_t* ids [[buffer(2)]], device float* out [[buffer(3)]], GAACRT_POSITIONS) {
  const uint32_t id = tgpig.x * ROWS_THREADS + tiitg;
  if (id >= a.n_rows * a.n_sub) return;
  const uint32_t r = id / a.n_sub, k = id % a.n_sub;
  rows_sub<L>(a, w + (uint64_t)ids[r] * a.row_stride, k, out + (uint64_t)r * a.n_cols);
}

}  // namespace mtl
}  // namespace gaacrt
