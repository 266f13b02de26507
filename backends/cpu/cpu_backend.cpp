// cpu_backend.cpp — CpuBackend memory, registration, and the op entry points.
#include "cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/error.h"
#include "cpu_features.h"
#include "dequantize.h"
#include "matvec.h"
#include "ops.h"
#include "quantize_act.h"

namespace gaacrt::cpu {

CpuBackend::CpuBackend(int n_threads, int act_bits) : pool_(n_threads), act_bits_(act_bits) {
  check_act_bits(act_bits);
  info_.backend = "cpu";
  info_.index = 0;
#if defined(__aarch64__)
  const char* arch = "aarch64";
#elif defined(__x86_64__) || defined(_M_X64)
  const char* arch = "x86_64";
#else
  const char* arch = "cpu";
#endif
  info_.name = strfmt("%s (%s), %d threads, %d-bit activations", arch, isa_name(best_isa()), pool_.size(), act_bits_);
}

void* CpuBackend::alloc(size_t bytes) {
  const size_t rounded = (bytes + 255) / 256 * 256;
  void* p = std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
  if (!p) throw Error("backend", "out_of_memory", strfmt("cpu: cannot allocate %zu bytes", bytes));
  return p;
}
void CpuBackend::free(void* p) { std::free(p); }
void CpuBackend::upload(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::download(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void CpuBackend::dequantize(const WeightView& w, float* dst) {
  require_gguf_layout(w, "cpu dequantize");
  pool_.parallel_for(w.n_rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + r * w.row_stride, dst + r * w.n_cols, w.n_cols);
  });
}

void CpuBackend::matmul(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias) {
  cpu::matmul(w, x, n_tok, y, pool_, best_isa(), act_bits_);
  if (bias)
    for (int64_t t = 0; t < n_tok; ++t) cpu::add(y + t * w.n_rows, bias, w.n_rows);
}

void CpuBackend::norm_matmuls(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim, int n_w,
                              const WeightView* w, const float* const* bias, float* const* y, float* xn) {
  cpu::rms_norm(x, norm_w, eps, n_tok, dim, xn, pool_);
  for (int i0 = 0; i0 < n_w; i0 += kMaxMatmulGroup)  // Q/K/V and gate/up are one group
    cpu::matmuls(std::min(kMaxMatmulGroup, n_w - i0), w + i0, xn, n_tok, y + i0, pool_, best_isa(), act_bits_);
  for (int i = 0; i < n_w; ++i)
    if (bias && bias[i])
      for (int64_t t = 0; t < n_tok; ++t) cpu::add(y[i] + t * w[i].n_rows, bias[i], w[i].n_rows);
}

void CpuBackend::get_rows(const WeightView& emb, const int32_t* ids, int64_t n, float scale, float* out) {
  cpu::get_rows(emb, ids, n, scale, out, pool_);
}
void CpuBackend::rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y) {
  cpu::rms_norm(x, w, eps, rows, dim, y, pool_);
}
void CpuBackend::rope(float* x, int64_t n_tok, int32_t n_heads, int32_t head_dim, const int32_t* pos,
                      const RopeParams& p) {
  cpu::rope(x, n_tok, n_heads, head_dim, pos, p, pool_);
}
void CpuBackend::add(float* y, const float* x, int64_t n) { cpu::add(y, x, n); }
void CpuBackend::act_mul(const float* g, const float* u, int64_t n, Activation act, float* h) {
  cpu::act_mul(g, u, n, act, h, pool_);
}
void CpuBackend::softcap(float* x, int64_t n, float cap) { cpu::softcap(x, n, cap); }
void CpuBackend::kv_store(const KVLayerView& kv, const KVTokenSlot* slots, int64_t n_tok, const float* k,
                          const float* v) {
  cpu::kv_store(kv, slots, n_tok, k, v, pool_);
}
void CpuBackend::kv_finalize(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs) {
  cpu::kv_finalize(kv, jobs, n_jobs, pool_);
}
void CpuBackend::attention(const KVLayerView& kv, const AttentionArgs& args, const AttnSeq* seqs, int32_t n_seqs,
                           const float* q, float* out) {
  cpu::attention(kv, args, seqs, n_seqs, q, out, pool_);
}

namespace {

std::vector<DeviceInfo> list_cpu() {
  DeviceInfo d;
  d.backend = "cpu";
  d.name = "host CPU";
  return {d};
}
std::string cpu_reason() { return ""; }
std::unique_ptr<Backend> create_cpu(const BackendParams& p) {
  return std::make_unique<CpuBackend>(p.n_threads, p.act_bits);
}

const BackendRegistrar kRegisterCpu{{"cpu", &list_cpu, &cpu_reason, &create_cpu}};

}  // namespace
}  // namespace gaacrt::cpu
