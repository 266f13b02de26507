// matmul_q8mma.cuh — the int8 tensor-core prefill matmul of quantized weights (matmul_q8mma.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace gaacrt::cuda {

// Scratch bytes of matmul_q8mma for n_tok tokens of n_cols.
size_t matmul_q8mma_scratch_bytes(int64_t n_tok, int64_t n_cols, bool q16);
// y(n_tok, w.n_rows) = x · wᵀ (+ bias) with x quantized per 32 values into scratch: to int8 (the
// decode path's activations), or q16 to the CPU backend's 16-bit ones. Returns false (nothing
// launched) for weights the int8 paths do not read (matvec_q8_supported), n_cols not a multiple
// of 32, or (q16) x not 16-byte aligned.
// Several weights of one type and width, read with one x in one launch (one quantization of x,
// one grid): up to kMaxMmaJobs, y[i] = x · w[i]ᵀ (+ bias[i]) for each, written as ep says:
//   Store    y[i] = the product (matmul, the Q/K/V of a prefill);
//   Add      y[0] += the product (matmul_add: the residual added in the epilogue);
//   GateAct  y[0] = act(x · w[0]ᵀ) ⊙ (x · w[1]ᵀ): the FFN's gate (w[0]) and up (w[1]) rows in the
//            same thread blocks (same row count, no bias), act_mul's formula; y[1] unused.
// The same bits as separate matmuls (and add / act_mul after them).
enum class MmaEpilogue : int32_t { Store, Add, GateAct };
constexpr int kMaxMmaJobs = 3;
struct MmaGroup {
  const WeightView* w;
  int n;
  float* const* y;
  const float* const* bias;  // null: none for any
  MmaEpilogue ep = MmaEpilogue::Store;
  Activation act = Activation::SiLU;
};
bool matmul_q8mma_group(const MmaGroup& g, const float* x, int64_t n_tok, bool q16, void* scratch,
                        cudaStream_t stream);

// Tokens per thread block, GAACRT_CUDA_Q8MMA_TOKENS (read on every call): 128, the default (each
// warp 32 rows x 32 tokens instead of 32 x 16: the step's weight unpacking and the A fragments
// serve twice the tokens), 64, or "auto" (0 here: per launch, the one whose grid takes fewer block-times,
// matmul_q8mma.cu auto_wide). The same arithmetic per output either way, so the same bits.
int matmul_q8mma_token_tile();
bool matmul_q8mma(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, bool q16,
                  void* scratch, cudaStream_t stream);

}  // namespace gaacrt::cuda
