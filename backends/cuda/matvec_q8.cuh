// matvec_q8.cuh — decode-sized matmul with 16- or 8-bit activations (BackendParams::act_bits) and
// integer dot products (dp4a); matvec_q8.cu says how 16 bits go through the 8-bit dot product.
#pragma once
#include <cuda_runtime.h>

#include "backend/backend.h"

namespace gaacrt::cuda {

constexpr int kMatvecQ8MaxTokens = 8;

// True when matvec_q8 handles this weight type.
bool matvec_q8_supported(GGMLType t);
// Bytes of scratch matvec_q8 needs for n_tok tokens of n_cols (either precision).
size_t matvec_q8_scratch_bytes(int64_t n_tok, int64_t n_cols);
// y(n_tok, w.n_rows) = x · wᵀ (+ bias), n_tok <= kMatvecQ8MaxTokens, x quantized per 32 values to
// 16 bits (q16) or 8. accumulate: y += the result (the same bits as into a buffer, then CudaBackend::add).
void matvec_q8(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, void* scratch,
               cudaStream_t stream, bool q16, bool accumulate = false);


// Activations quantized for matvec_q8 in scratch: int8 values (n_tok, n_cols) — with 16 bits their
// high bytes, then the low bytes in lo (null with 8 bits) — then per 32 values the scale d, d·Σq
// and Σq itself as an integer (the layout matvec_q8 and matmul_q8mma.cu use; q8_act carves it).
struct Q8Act {
  int8_t* q;
  uint8_t* lo;
  float *d, *s;
  int32_t* n;
  int64_t n_tok, n_cols;
};
// Bytes of that layout (n_cols % 32 == 0), and the layout carved from `base` (the scratch, or a
// kernel's shared memory): q, with 16 bits lo, then per 32 values d, s and n.
__host__ __device__ inline size_t xq_bytes(int64_t n_tok, int64_t n_cols, bool q16) {
  return (q16 ? 2 : 1) * (size_t)n_tok * n_cols + (2 * sizeof(float) + sizeof(int32_t)) * (size_t)n_tok * (n_cols / 32);
}
__host__ __device__ inline Q8Act q8_act(void* base, int64_t n_tok, int64_t n_cols, bool q16) {
  Q8Act a;
  a.q = static_cast<int8_t*>(base);
  a.lo = q16 ? reinterpret_cast<uint8_t*>(a.q + n_tok * n_cols) : nullptr;
  a.d = reinterpret_cast<float*>(a.q + (q16 ? 2 : 1) * n_tok * n_cols);  // n_cols % 32 == 0: aligned
  a.s = a.d + n_tok * (n_cols / 32);
  a.n = reinterpret_cast<int32_t*>(a.s + n_tok * (n_cols / 32));
  a.n_tok = n_tok;
  a.n_cols = n_cols;
  return a;
}
// x(n_tok, n_cols) quantized into scratch (matvec_q8_scratch_bytes) in one launch: the
// activations of every int8 path (matvec_q8, the prefill matmul of matmul_q8mma.cu). 16 bits:
// backends/cpu/quantize_act.cpp quantize_row_q16's bits.
Q8Act quantize_q8(const float* x, int64_t n_tok, int64_t n_cols, void* scratch, cudaStream_t stream, bool q16);
// y = a · wᵀ (+ bias) over activations already quantized (matvec_q8's second half; accumulate as there).
void matvec_q8_quantized(const WeightView& w, const Q8Act& a, float* y, const float* bias, cudaStream_t stream,
                         bool accumulate = false);
// Throws unless w's data and rows are aligned as the int8 paths' weight loads need.
void check_q8_alignment(const WeightView& w, const char* what);

// xn(n_tok, dim) = rms_norm(x)·norm_w (bit-identical to CudaBackend::rms_norm) and its quantization
// (bit-identical to what matvec_q8 makes of xn), one launch.
void norm_quant_q8(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim, float* xn,
                   const Q8Act& a, cudaStream_t stream);
// norm_quant_q8 reads and writes float4s: false when a pointer does not allow it (the caller then
// composes rms_norm and matvec_q8).
bool norm_quant_q8_aligned(const float* x, const float* norm_w, const float* xn);
// The norm of a fused norm + matvec done inside the matvec's launch: every thread block computes
// xn = rms_norm(x)·w and quantizes it into shared memory (block 0 also writes xn), the same bits
// as norm_quant_q8. Pays where x is short (SmolLM2's 576, Gemma-3 270m's 640: one launch of ~2 µs
// fewer per norm, two per layer): up to kNormSelfMaxDim values, dim / 4 threads of a block.
// (At 4,096 values, every block norming them cost far more than the launch saved: 8B-shape tg128
// 396 -> 290 tok/s on the H200.) GAACRT_CUDA_NORM_SELF=0 turns it off.
constexpr int64_t kNormSelfMaxDim = 1024;
struct NormX {
  const float* x;
  const float* w;
  float eps;
  float* xn;
};
// True when the matvecs below can take the norm (GAACRT_CUDA_NORM_SELF=0: never).
bool matvec_q8_norm_fits(int64_t n_tok, int64_t dim, const NormX& nx);
// y_i = x·w_iᵀ (+ bias_i) for up to three matrices over the quantized x: one launch when they
// share a type. Same bits as matvec_q8 per matrix. With norm, x is norm's xn: made inside the
// launch where matvec_q8_norm_fits holds and the types agree, else by norm_quant_q8 into `a` first.
void matvec_q8_multi(const WeightView* w, int n_w, float* const* y, const float* const* bias, const Q8Act& a,
                     cudaStream_t stream, const NormX* norm = nullptr);
// y = {q, k, v} as matvec_q8_multi makes them (w = Q, K, V weights of one type, norm as there),
// then RoPE of q and k at positions pos and k, v stored in the cache (rope_store_kernel), in one
// launch (qkv_rope.cu). False, nothing launched, where it does not apply: weights of mixed types
// or not n_head / kv.n_head_kv heads of kv.head_dim rows, a partial rotation, or
// GAACRT_CUDA_QKV_ROPE=0. The caller checks rope_store_fuses (kernels/rope_math.cuh).
bool matvec_q8_qkv_rope(const WeightView* w, const float* const* bias, float* const* y, const Q8Act& a,
                        const NormX* norm, int32_t n_head, const int32_t* pos, const RopeParams& rope,
                        const KVLayerView& kv, const KVTokenSlot* slots, cudaStream_t stream);
// h = act(x·gateᵀ) ⊙ (x·upᵀ) in one launch (same bits as two matvec_q8 and act_mul); false when
// gate and up differ in type or shape (nothing launched). norm: as for matvec_q8_multi.
bool matvec_q8_gate_up(const WeightView& gate, const WeightView& up, Activation act, float* h, const Q8Act& a,
                       cudaStream_t stream, const NormX* norm = nullptr);
// matvec_q8 in one launch, each thread block quantizing x into shared memory; false (nothing
// launched) where quantizing x in every block costs more than a second launch: x of more than
// kMatvecQ8SelfMaxValues values (H200, Llama-3.1-8B shape: o-proj, 4,096 columns, 19.3 µs in one
// launch vs 15.6 in two with the add; down-proj, 14,336 columns, 62.7 vs 44.1), or more than
// kMatvecQ8SelfMaxRows rows (so many blocks, as in a large LM head). Same bits as matvec_q8
// (accumulate: y += the result, as matvec_q8's accumulate).
constexpr int64_t kMatvecQ8SelfMaxValues = 2048, kMatvecQ8SelfMaxRows = 16384;
bool matvec_q8_self(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias,
                    cudaStream_t stream, bool q16, bool accumulate = false);

}  // namespace gaacrt::cuda
