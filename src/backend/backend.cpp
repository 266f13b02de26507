// backend.cpp — reference implementations of the fused ops, composed of the primitive ops.
// A backend overrides one when it has a fused kernel; the result must stay within the op's
// tolerance of this composition (bit-identical where the op promises it).
#include "backend.h"

#include <cstdint>
#include <cstdlib>

#include "common/error.h"

namespace gaacrt {

void require_gguf_layout(const WeightView& w, const char* op) {
  if (w.layout != WeightLayout::GGUF)
    throw Error("backend", "invalid_argument",
                strfmt("%s: a %s weight in another backend's layout (%d); this backend reads GGUF blocks only", op,
                       type_name(w.type), (int)w.layout));
}

void* Backend::alloc_host(size_t bytes) { return std::malloc(bytes == 0 ? 1 : bytes); }
void Backend::free_host(void* p) { std::free(p); }

WeightView Backend::place_weight(const WeightView& host, void** owned) {
  WeightView w = host;
  *owned = nullptr;
  if (shares_host_memory() && reinterpret_cast<uintptr_t>(host.data) % 4 == 0) return w;
  const size_t n = (size_t)host.n_rows * host.row_stride;
  void* dst = alloc(n);
  try {
    upload(dst, host.data, n);
  } catch (...) {
    free(dst);
    throw;
  }
  *owned = dst;
  w.data = dst;
  return w;
}

void Backend::norm_matmuls(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim, int n_w,
                           const WeightView* w, const float* const* bias, float* const* y, float* xn) {
  rms_norm(x, norm_w, eps, n_tok, dim, xn);
  for (int i = 0; i < n_w; ++i) matmul(w[i], xn, n_tok, y[i], bias ? bias[i] : nullptr);
}

void Backend::qk_rope_store(float* q, float* k, const float* v, int64_t n_tok, int32_t n_head, const float* q_norm,
                            const float* k_norm, float eps, const int32_t* pos, const RopeParams& rope,
                            const KVLayerView& kv, const KVTokenSlot* slots) {
  const int32_t d = kv.head_dim_k;
  if (q_norm) rms_norm(q, q_norm, eps, n_tok * n_head, d, q);
  if (k_norm) rms_norm(k, k_norm, eps, n_tok * kv.n_head_kv, d, k);
  this->rope(q, n_tok, n_head, d, pos, rope);
  this->rope(k, n_tok, kv.n_head_kv, d, pos, rope);
  kv_store(kv, slots, n_tok, k, v);
}

void Backend::norm_qkv_rope_store(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim,
                                  const WeightView* w, const float* const* bias, float* q, float* k, float* v,
                                  float* xn, int32_t n_head, const float* q_norm, const float* k_norm,
                                  const int32_t* pos, const RopeParams& rope, const KVLayerView& kv,
                                  const KVTokenSlot* slots) {
  float* y[3] = {q, k, v};
  norm_matmuls(x, norm_w, eps, n_tok, dim, 3, w, bias, y, xn);
  qk_rope_store(q, k, v, n_tok, n_head, q_norm, k_norm, eps, pos, rope, kv, slots);
}

void Backend::matmul_add(const WeightView& w, const float* x, int64_t n_tok, float* y, float* tmp) {
  matmul(w, x, n_tok, tmp, nullptr);
  add(y, tmp, n_tok * w.n_rows);
}

void Backend::norm_gate_up(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim,
                           const WeightView& gate, const WeightView& up, Activation act, float* h, float* up_scratch,
                           float* xn) {
  const WeightView w[2] = {gate, up};
  float* y[2] = {h, up_scratch};
  norm_matmuls(x, norm_w, eps, n_tok, dim, 2, w, nullptr, y, xn);
  act_mul(h, up_scratch, n_tok * gate.n_rows, act, h);
}

}  // namespace gaacrt
