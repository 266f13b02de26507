// cpu_backend.h — the reference backend: host memory, a thread pool, SIMD kernels.
// act_bits (8 or 16) is the activation precision of its integer matmuls (quantize_act.h).
#pragma once
#include "backend/backend.h"
#include "thread_pool.h"

namespace gaacrt::cpu {

class CpuBackend final : public Backend {
 public:
  // Throws Error("quant", "bad_act_bits") unless act_bits is 8 or 16.
  explicit CpuBackend(int n_threads, int act_bits = 16);
  const DeviceInfo& device() const override { return info_; }

  void* alloc(size_t bytes) override;
  void free(void* p) override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;
  void synchronize() override {}
  bool shares_host_memory() const override { return true; }

  void dequantize(const WeightView& w, float* dst) override;
  void matmul(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias) override;
  void get_rows(const WeightView& emb, const int32_t* ids, int64_t n, float scale, float* out) override;
  void rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y) override;
  void rope(float* x, int64_t n_tok, int32_t n_heads, int32_t head_dim, const int32_t* pos,
            const RopeParams& p) override;
  void add(float* y, const float* x, int64_t n) override;
  void act_mul(const float* g, const float* u, int64_t n, Activation act, float* h) override;
  void softcap(float* x, int64_t n, float cap) override;
  void kv_store(const KVLayerView& kv, const KVTokenSlot* slots, int64_t n_tok, const float* k,
                const float* v) override;
  void kv_finalize(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs) override;
  void attention(const KVLayerView& kv, const AttentionArgs& args, const AttnSeq* seqs, int32_t n_seqs,
                 const float* q, float* out) override;
  // Fused: the normalised input is quantized once for all n_w matrices (once in all at act_bits
  // 16) and their products share one dispatch of the pool; bit-identical to the reference.
  void norm_matmuls(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim, int n_w,
                    const WeightView* w, const float* const* bias, float* const* y, float* xn) override;

  ThreadPool& pool() { return pool_; }
  int act_bits() const { return act_bits_; }

 private:
  ThreadPool pool_;
  int act_bits_;
  DeviceInfo info_;
};

}  // namespace gaacrt::cpu
