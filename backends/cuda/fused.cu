// fused.cu — CudaBackend's fused decode ops (backend.h "fused ops"): norm + activation quantize
// once, then Q/K/V (or gate/up + activation) in one launch (matvec_q8.cu). Bit-identical to the
// reference compositions in backend.cpp run on this backend; batches the int8 path does not take
// (prefill, float weights) use those compositions. qk_rope_store is in rope.cu; the Q/K/V + RoPE +
// store kernel of norm_qkv_rope_store in qkv_rope.cu.
#include "cuda_backend.h"
#include "cuda_common.h"
#include "kernels/rope_math.cuh"
#include "matmul_q8mma.cuh"
#include "matvec_q8.cuh"

namespace gaacrt::cuda {
namespace {
bool q8_decode(int64_t n_tok, int64_t dim, const WeightView* w, int n_w) {
  if (n_tok <= 0 || n_tok > kMatvecQ8MaxTokens || dim % 32) return false;
  for (int i = 0; i < n_w; ++i)
    if (w[i].n_cols != dim || !matvec_q8_supported(w[i].type)) return false;
  return true;
}
}  // namespace

// A prefill's products of one normed x on the int8 tensor cores, in one launch (prefill_group):
// the norm first, as Backend's composition does it.
bool CudaBackend::norm_prefill_group(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim,
                                     const MmaGroup& g, float* xn) {
  for (int i = 0; i < g.n; ++i)
    if (g.w[i].n_cols != dim) return false;
  if (n_tok <= kMatvecQ8MaxTokens) return false;  // decode sizes: the matvec paths below
  rms_norm(x, norm_w, eps, n_tok, dim, xn);
  if (prefill_group(g, xn, n_tok)) return true;
  // Not the int8 kernel's: the composition's remaining steps on the normed x.
  if (g.ep == MmaEpilogue::GateAct) {
    matmul(g.w[0], xn, n_tok, g.y[0], nullptr);
    matmul(g.w[1], xn, n_tok, g.y[1], nullptr);
    act_mul(g.y[0], g.y[1], n_tok * g.w[0].n_rows, g.act, g.y[0]);
  } else {
    for (int i = 0; i < g.n; ++i) matmul(g.w[i], xn, n_tok, g.y[i], g.bias ? g.bias[i] : nullptr);
  }
  return true;
}

void CudaBackend::norm_matmuls(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim, int n_w,
                               const WeightView* w, const float* const* bias, float* const* y, float* xn) {
  if (n_w >= 1 && n_w <= kMaxMmaJobs &&
      norm_prefill_group(x, norm_w, eps, n_tok, dim, MmaGroup{w, n_w, y, bias}, xn))
    return;
  if (n_w < 1 || n_w > 3 || !q8_decode(n_tok, dim, w, n_w) || !norm_quant_q8_aligned(x, norm_w, xn)) {
    Backend::norm_matmuls(x, norm_w, eps, n_tok, dim, n_w, w, bias, y, xn);
    return;
  }
  const Q8Act a = q8_act(scratch(matvec_q8_scratch_bytes(n_tok, dim)), n_tok, dim, q16_);
  const NormX nx{x, norm_w, eps, xn};
  matvec_q8_multi(w, n_w, y, bias, a, stream_, &nx);  // the norm in the matvec's launch where it fits
}

void CudaBackend::norm_qkv_rope_store(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim,
                                      const WeightView* w, const float* const* bias, float* q, float* k, float* v,
                                      float* xn, int32_t n_head, const float* q_norm, const float* k_norm,
                                      const int32_t* pos, const RopeParams& rope, const KVLayerView& kv,
                                      const KVTokenSlot* slots) {
  if (q8_decode(n_tok, dim, w, 3) && norm_quant_q8_aligned(x, norm_w, xn) && rope_store_fuses(q_norm, k_norm, rope, kv)) {
    const Q8Act a = q8_act(scratch(matvec_q8_scratch_bytes(n_tok, dim)), n_tok, dim, q16_);
    const NormX nx{x, norm_w, eps, xn};
    float* const y[3] = {q, k, v};
    if (matvec_q8_qkv_rope(w, bias, y, a, &nx, n_head, pos, rope, kv, slots, stream_)) return;
  }
  Backend::norm_qkv_rope_store(x, norm_w, eps, n_tok, dim, w, bias, q, k, v, xn, n_head, q_norm, k_norm, pos, rope, kv,
                               slots);
}

void CudaBackend::norm_gate_up(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim,
                               const WeightView& gate, const WeightView& up, Activation act, float* h,
                               float* up_scratch, float* xn) {
  const WeightView w[2] = {gate, up};
  float* const gy[2] = {h, up_scratch};
  if (gate.type == up.type && gate.n_rows == up.n_rows &&
      norm_prefill_group(x, norm_w, eps, n_tok, dim, MmaGroup{w, 2, gy, nullptr, MmaEpilogue::GateAct, act}, xn))
    return;
  if (q8_decode(n_tok, dim, w, 2) && gate.type == up.type && gate.n_rows == up.n_rows &&
      norm_quant_q8_aligned(x, norm_w, xn)) {
    const Q8Act a = q8_act(scratch(matvec_q8_scratch_bytes(n_tok, dim)), n_tok, dim, q16_);
    const NormX nx{x, norm_w, eps, xn};
    if ((act == Activation::SiLU || act == Activation::GeluTanh) && matvec_q8_norm_fits(n_tok, dim, nx) &&
        matvec_q8_gate_up(gate, up, act, h, a, stream_, &nx))
      return;  // one launch: every block norms x itself
    norm_quant_q8(x, norm_w, eps, n_tok, dim, xn, a, stream_);
    if (matvec_q8_gate_up(gate, up, act, h, a, stream_)) return;
    float* y[2] = {h, up_scratch};
    matvec_q8_multi(w, 2, y, nullptr, a, stream_);
    act_mul(h, up_scratch, n_tok * gate.n_rows, act, h);
    return;
  }
  Backend::norm_gate_up(x, norm_w, eps, n_tok, dim, gate, up, act, h, up_scratch, xn);
}

void CudaBackend::matmul_add(const WeightView& w, const float* x, int64_t n_tok, float* y, float* tmp) {
  float* const ys[1] = {y};
  if (prefill_group(MmaGroup{&w, 1, ys, nullptr, MmaEpilogue::Add}, x, n_tok)) return;  // y += in the epilogue
  if (n_tok > 0 && w.n_rows > 0 && n_tok <= kMatvecQ8MaxTokens && w.n_cols % 32 == 0 && matvec_q8_supported(w.type)) {
    if (!matvec_q8_self(w, x, n_tok, y, nullptr, stream_, q16_, true))
      matvec_q8(w, x, n_tok, y, nullptr, scratch(matvec_q8_scratch_bytes(n_tok, w.n_cols)), stream_, q16_, true);
    return;
  }
  Backend::matmul_add(w, x, n_tok, y, tmp);
}

}  // namespace gaacrt::cuda
