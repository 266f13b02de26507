// matmul.h — y(n_tok, n_rows) = x(n_tok, n_cols) · wᵀ (+ bias) for every weight type, with fp32
// activations (no 8-bit activation quantization: the Metal result is closer to exact than the
// CPU's). Two kernels, chosen by the host (host/metal_plan.cpp) on the number of tokens:
//   matvec  (decode, n_tok <= MATVEC_MAX_TOK): one SIMD group per weight row, lanes stride over
//           its 32-element sub-blocks, every token of the batch reuses each decoded sub-block,
//           one simd_sum per token;
//   matmul  (prefill): a threadgroup computes a 32-row x 32-token tile; per K step of 32 the
//           first SIMD group decodes the 32 weight sub-blocks into threadgroup memory while all
//           threads stage the 32x32 activations, then each thread accumulates 8 outputs.
#pragma once
#include "metal/kernels/weights.h"

namespace gaacrt {
namespace mtl {

// bias is bound to y when there is none (a.has_bias = 0; never read).
template <typename L>
kernel void matvec(constant MatmulArgs& a [[buffer(0)]], device const uint8_t* w [[buffer(1)]],
                   device const float* x [[buffer(2)]], device const float* bias [[buffer(3)]],
                   device float* y [[buffer(4)]], GAACRT_POSITIONS) {
  const uint32_t row = tgpig.x * MATVEC_SIMDGROUPS + sgitg;
  if (row >= a.n_rows) return;  // a whole SIMD group leaves together (uniform)
  float acc[MATVEC_MAX_TOK];
  for (uint32_t t = 0; t < MATVEC_MAX_TOK; ++t) acc[t] = 0.0f;
  const device uint8_t* wr = w + (uint64_t)row * a.row_stride;
  for (uint32_t k = tiisg; k < a.n_sub; k += SIMD_WIDTH) {
    float wv[SUB];
    L::load32(wr, k, a.n_cols, wv);
    const uint32_t n = a.n_cols - SUB * k < SUB ? a.n_cols - SUB * k : SUB;
    for (uint32_t t = 0; t < a.n_tok; ++t) {
      const device float* xt = x + (uint64_t)t * a.n_cols + SUB * k;
      float s = 0.0f;
      for (uint32_t j = 0; j < n; ++j) s += wv[j] * xt[j];
      acc[t] += s;
    }
  }
  for (uint32_t t = 0; t < a.n_tok; ++t) {
    const float s = simd_sum(acc[t]);
    if (tiisg == 0) y[(uint64_t)t * a.n_rows + row] = a.has_bias ? s + bias[row] : s;
  }
}

// wt: MM_TILE_ROWS x MM_PAD floats; xt: MM_TILE_TOK x MM_PAD floats.
template <typename L>
kernel void matmul(constant MatmulArgs& a [[buffer(0)]], device const uint8_t* w [[buffer(1)]],
                   device const float* x [[buffer(2)]], device const float* bias [[buffer(3)]],
                   device float* y [[buffer(4)]], threadgroup float* wt GAACRT_TG_MEM(0),
                   threadgroup float* xt GAACRT_TG_MEM(1), GAACRT_POSITIONS) {
  constexpr uint32_t TOK_PER_THREAD = MM_TILE_TOK * MM_TILE_ROWS / MM_THREADS;  // 8
  const uint32_t r0 = tgpig.x * MM_TILE_ROWS, t0 = tgpig.y * MM_TILE_TOK;
  const uint32_t my_row = tiitg % MM_TILE_ROWS, my_tok = (tiitg / MM_TILE_ROWS) * TOK_PER_THREAD;
  float acc[TOK_PER_THREAD];
  for (uint32_t q = 0; q < TOK_PER_THREAD; ++q) acc[q] = 0.0f;
  for (uint32_t k = 0; k < a.n_sub; ++k) {
    if (tiitg < MM_TILE_ROWS) {
      float wv[SUB];
      if (r0 + tiitg < a.n_rows) L::load32(w + (uint64_t)(r0 + tiitg) * a.row_stride, k, a.n_cols, wv);
      else
        for (uint32_t j = 0; j < SUB; ++j) wv[j] = 0.0f;
      for (uint32_t j = 0; j < SUB; ++j) wt[tiitg * MM_PAD + j] = wv[j];
    }
    for (uint32_t e = tiitg; e < MM_TILE_TOK * SUB; e += MM_THREADS) {
      const uint32_t tt = e / SUB, col = SUB * k + e % SUB;
      xt[tt * MM_PAD + e % SUB] = t0 + tt < a.n_tok && col < a.n_cols ? x[(uint64_t)(t0 + tt) * a.n_cols + col] : 0.0f;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint32_t q = 0; q < TOK_PER_THREAD; ++q) {
      float s = 0.0f;
      for (uint32_t j = 0; j < SUB; ++j) s += wt[my_row * MM_PAD + j] * xt[(my_tok + q) * MM_PAD + j];
      acc[q] += s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  const uint32_t row = r0 + my_row;
  for (uint32_t q = 0; q < TOK_PER_THREAD; ++q) {
    const uint32_t tok = t0 + my_tok + q;
    if (tok < a.n_tok && row < a.n_rows) y[(uint64_t)tok * a.n_rows + row] = a.has_bias ? acc[q] + bias[row] : acc[q];
  }
}

}  // namespace mtl
}  // namespace gaacrt
