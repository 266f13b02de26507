// cuda_backend.h — the CUDA backend: device memory, one stream, the op launchers (one .cu per op:
// get_rows.cu, rms_norm.cu, rope.cu, elementwise.cu, kv_store.cu, attention.cu, matmul.cu, ...).
#pragma once
#include <cuda_runtime.h>

#include "backend/backend.h"
#include "common/error.h"

namespace gaacrt::cuda {

struct MmaGroup;  // matmul_q8mma.cuh

// Kernels cannot throw: a kernel that finds bad data (a corrupt compressed KV tile) records it
// here, in host-mapped memory, and the backend raises at the next synchronize/download, when the
// stream has caught up. No extra synchronization is added to the decode step for it.
struct DeviceErrors {
  int32_t code;            // 0 = none; 1 = corrupt KV tile
  int32_t layer, head, block;
};

// What attention_expanded would decode a GAAC launch of this shape into (attention_gaac_expand.cu):
// bytes 0 where it does not apply (a step that may be recorded as a graph, too few rows, more
// than GAACRT_CUDA_GAAC_EXPAND_MIB, GAACRT_CUDA_GAAC_EXPAND=0). attention.cu asks it of BF16
// launches too: they take the wgmma prefill kernel only where a GAAC launch would run on it.
struct ExpansionPlan {
  uint64_t bytes = 0, table_bytes = 0;
  int64_t n_pages = 0, entries = 0, n_entries = 0;  // entries: one sequence's table entries
  int32_t nb = 0;                                    // blocks of the longest sequence
};
ExpansionPlan expansion_plan(const KVLayerView& kv, const AttentionArgs& args, int32_t n_seqs);

class CudaBackend final : public Backend {
 public:
  // act_bits: the int8 paths' activation precision, 16 (the default) or 8, as on the CPU backend
  // (BackendParams::act_bits; matvec_q8.cu).
  explicit CudaBackend(int device, int act_bits = 16);
  ~CudaBackend() override;
  const DeviceInfo& device() const override { return info_; }

  void* alloc(size_t bytes) override;
  void free(void* p) override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;
  void synchronize() override;
  bool shares_host_memory() const override { return false; }
  void* alloc_host(size_t bytes) override;  // page-locked
  void free_host(void* p) override;
  // Q4_0 / Q8_0 / Q6_K rows of whole groups of eight blocks in the group-of-eight layout (place_weight.cu).
  WeightView place_weight(const WeightView& host, void** owned) override;

  // CUDA graphs (stream capture); GAACRT_CUDA_GRAPH=0 turns recording and replay off.
  uint64_t capture_epoch() const override { return epoch_; }
  bool begin_capture() override;
  std::unique_ptr<StepGraph> end_capture() override;
  bool replay(StepGraph& g) override;

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

  // Fused decode ops (fused.cu, rope.cu): one launch each for decode-sized batches of quantized
  // weights, bit-identical to the reference compositions in backend.cpp; anything else falls back.
  void norm_matmuls(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim, int n_w,
                    const WeightView* w, const float* const* bias, float* const* y, float* xn) override;
  void norm_qkv_rope_store(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim,
                           const WeightView* w, const float* const* bias, float* q, float* k, float* v, float* xn,
                           int32_t n_head, const float* q_norm, const float* k_norm, const int32_t* pos,
                           const RopeParams& rope, const KVLayerView& kv, const KVTokenSlot* slots) override;
  void qk_rope_store(float* q, float* k, const float* v, int64_t n_tok, int32_t n_head, const float* q_norm,
                     const float* k_norm, float eps, const int32_t* pos, const RopeParams& rope, const KVLayerView& kv,
                     const KVTokenSlot* slots) override;
  void matmul_add(const WeightView& w, const float* x, int64_t n_tok, float* y, float* tmp) override;
  void norm_gate_up(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim, const WeightView& gate,
                    const WeightView& up, Activation act, float* h, float* up_scratch, float* xn) override;

  cudaStream_t stream() const { return stream_; }

 private:
  // Raises the error a kernel recorded in errors_ (call after the stream is synchronized).
  void raise_device_errors();
  // Device scratch of at least `bytes`, kept between calls (attention partials, quantized
  // activations). Growing it bumps epoch_ (recorded graphs hold its address); while recording it
  // cannot grow (that would synchronize) and throws instead.
  void* scratch(size_t bytes);
  // A second such buffer, for the pages attention_expanded decodes a GAAC layer into (the
  // attention launch it makes over them takes its partials from scratch()); nullptr when the
  // device has not the memory (the caller then takes the GAAC kernels, which need none), and
  // at once for that size or more after one such refusal.
  void* expand_buffer(size_t bytes);
  // Grows buf (have bytes) to at least `bytes` as scratch() does; `what` names it while recording;
  // optional: an allocation that fails for want of memory returns nullptr instead of throwing.
  void* grow_buffer(void*& buf, size_t& have, size_t bytes, const char* what, bool optional);
  // A GAAC layer's prefill-sized launch as a BF16 one over its tiles decoded once into
  // expand_buffer() (attention_gaac_expand.cu says when and why); false, with nothing launched,
  // where it does not apply.
  bool attention_expanded(const KVLayerView& kv, const AttentionArgs& args, const AttnSeq* seqs, int32_t n_seqs,
                          const float* q, float* out);
  // Prefill-sized products of up to three weights read with one x on the int8 tensor cores in
  // one launch (matmul_q8mma.cuh's MmaGroup: Q/K/V, gate/up with the activation, the residual
  // add); false (nothing launched) where that kernel is not the prefill path for these weights.
  bool prefill_group(const MmaGroup& g, const float* x, int64_t n_tok);
  // The norm of x, then prefill_group on it (or, where that declines, the composition's own
  // steps); false, with nothing done, for decode sizes or a weight whose width is not dim.
  bool norm_prefill_group(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim,
                          const MmaGroup& g, float* xn);
  // Throws while recording: `what` would synchronize or reallocate.
  void no_capture(const char* what) const;

  int device_;
  bool q16_;  // 16-bit activations (act_bits 16), else 8-bit
  cudaStream_t stream_ = nullptr;
  DeviceInfo info_;
  DeviceErrors* errors_ = nullptr;      // host-mapped (cudaHostAllocMapped)
  DeviceErrors* dev_errors_ = nullptr;  // its device address
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  void* expand_ = nullptr;
  size_t expand_bytes_ = 0;
  size_t expand_refused_ = 0;  // the smallest size the device could not allocate (0: none yet)
  int32_t* attn_counters_ = nullptr;  // attention.cu: split-K arrival counters (zeroed once, kernels reset them)
  int64_t attn_counters_n_ = 0;
  uint64_t epoch_ = 0;      // bumped whenever scratch_, expand_ or attn_counters_ is replaced
  bool capturing_ = false;
};

}  // namespace gaacrt::cuda
