// backend.h — the op interface every backend implements (CPU is the reference).
//
// One op = one declaration here + one file per backend with the same stem
// (backends/cpu/rms_norm.cpp, backends/cuda/rms_norm.cu, backends/metal/kernels/rms_norm.metal).
// Ops take device pointers, sizes and strides; the backend checks what it is given, its kernels
// do not. Pointer comments give shapes row-major, slowest dimension first.
//
// The forward pass (src/model/forward.cpp) is written once against this interface. The fused
// ops at the end have reference implementations here, composed of the primitive ops; a GPU
// backend overrides them with one kernel each so a decode step is about ten launches per layer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "devices.h"
#include "kv/kv_view.h"
#include "quant/types.h"

namespace gaacrt {

// How a backend stores a weight's blocks: as in the GGUF file, or each run of eight blocks of a
// row regrouped field by field: their scales, then their quant bytes (quant/group8.h; CUDA does
// this for Q4_0, Q8_0 and Q6_K rows of whole groups, so its loads are aligned). Same bytes per row.
enum class WeightLayout : uint8_t { GGUF = 0, Group8 = 1 };

// A weight matrix in backend memory: n_rows rows (output features) of n_cols elements of `type`,
// each row `row_stride` bytes after the previous (ggml: ne[0] = n_cols, ne[1] = n_rows).
struct WeightView {
  GGMLType type = GGMLType::F32;
  int64_t n_rows = 0, n_cols = 0;
  size_t row_stride = 0;
  const void* data = nullptr;
  WeightLayout layout = WeightLayout::GGUF;
  bool empty() const { return data == nullptr; }
};

// For the backends that read weights in the GGUF layout only (CPU, Metal): throws, naming `op`, for
// a view in another layout (one a different backend placed; backend.cpp).
void require_gguf_layout(const WeightView& w, const char* op);

enum class RopeStyle : int32_t {
  Norm = 0,  // rotate adjacent pairs (x[2i], x[2i+1]) — llama (its converter permutes Q/K)
  Neox = 2,  // rotate half-split pairs (x[i], x[i + n_rot/2]) — qwen2/3, gemma3
};

// Everything that decides the rotation angle of pair i at position p (spec/gguf.md §3.1):
// theta = p * freq_scale * base^(-2i/n_rot) / freq_factors[i], YaRN mixing when ext_factor != 0.
struct RopeParams {
  RopeStyle style = RopeStyle::Norm;
  int32_t n_rot = 0;              // rotated dims per head; the rest pass through
  float base = 10000.f;
  float freq_scale = 1.f;         // 1 / linear scaling factor
  const float* freq_factors = nullptr;  // (n_rot/2) or null (Llama 3.1 rope_freqs)
  float ext_factor = 0.f;         // YaRN
  float attn_factor = 1.f;
  float beta_fast = 32.f, beta_slow = 1.f;
  int32_t n_ctx_orig = 0;
};

enum class Activation : int32_t { SiLU = 0, GeluTanh = 1 };

// A recorded step (a CUDA graph): the ops issued between begin_capture and end_capture, replayed
// as one unit. Only the backend that made it can replay it.
class StepGraph {
 public:
  virtual ~StepGraph() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& device() const = 0;

  // ---- memory ----
  virtual void* alloc(size_t bytes) = 0;  // 256-byte aligned; throws Error("backend","out_of_memory")
  virtual void free(void* p) = 0;
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;    // host -> device
  virtual void download(void* dst, const void* src, size_t bytes) = 0;  // device -> host
  virtual void synchronize() = 0;
  // True when host pointers (a mapped GGUF) can be used directly as weights (CPU, Apple unified memory).
  virtual bool shares_host_memory() const = 0;
  // Host memory for per-step uploads: page-locked where that makes upload() asynchronous (CUDA).
  virtual void* alloc_host(size_t bytes);
  virtual void free_host(void* p);
  // Copies a weight matrix (GGUF bytes at host.data, rows host.row_stride apart) into backend
  // memory and returns its view there. A backend may store it in its own layout (the returned
  // view's `layout`; its ops read that layout). *owned is the memory to free() afterwards, null
  // when the host bytes are used in place (shares_host_memory()).
  virtual WeightView place_weight(const WeightView& host, void** owned);

  // ---- step graphs (DESIGN.md "Ops, graphs and the attention op") ----
  // A backend that can record a step's ops once and replay them overrides these; the defaults
  // record nothing, so the caller runs every step eagerly. A recorded step bakes in the ops'
  // arguments (device pointers, sizes, the cache views): the caller keys it on those and only
  // replays it while its key and capture_epoch() are unchanged.
  // Changes whenever the backend replaces memory its ops use internally (scratch buffers).
  virtual uint64_t capture_epoch() const { return 0; }
  // Starts recording: the ops issued until end_capture are recorded, not run. Returns false when
  // the backend does not record (unsupported, or disabled: GAACRT_CUDA_GRAPH=0); run eagerly then.
  virtual bool begin_capture() { return false; }
  // Ends recording; null when it failed (nothing ran: the caller runs the ops eagerly). Must be
  // called after a successful begin_capture, also when an op threw meanwhile.
  virtual std::unique_ptr<StepGraph> end_capture() { return nullptr; }
  // Runs a recorded step on the backend's queue; false when replay is disabled (run eagerly).
  virtual bool replay(StepGraph&) { return false; }

  // ---- primitive ops ----
  // dst(n_rows, w.n_cols) = dequantize(w): bit-identical to the gguf package on every backend.
  virtual void dequantize(const WeightView& w, float* dst) = 0;
  // y(n_tok, w.n_rows) = x(n_tok, w.n_cols) · wᵀ (+ bias(w.n_rows) when given). On the CPU the
  // activations are quantized to BackendParams::act_bits: 16 (int16 per 32 values, the default)
  // or 8 (llama.cpp's vec_dot_type per weight type).
  virtual void matmul(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias) = 0;
  // out(n, dim) = rows ids[0..n) of the embedding matrix, dequantized, times `scale`.
  virtual void get_rows(const WeightView& emb, const int32_t* ids, int64_t n, float scale, float* out) = 0;
  // y(rows, dim) = x / sqrt(mean(x²) + eps) * w(dim); y may alias x.
  virtual void rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y) = 0;
  // x(n_tok, n_heads, head_dim) rotated in place; token t is at position pos[t].
  virtual void rope(float* x, int64_t n_tok, int32_t n_heads, int32_t head_dim, const int32_t* pos,
                    const RopeParams& p) = 0;
  // y(n) += x(n)
  virtual void add(float* y, const float* x, int64_t n) = 0;
  // h(n) = act(g(n)) * u(n); h may alias g.
  virtual void act_mul(const float* g, const float* u, int64_t n, Activation act, float* h) = 0;
  // x(n) = cap * tanh(x / cap)
  virtual void softcap(float* x, int64_t n, float cap) = 0;

  // ---- KV cache ops (kv/kv_view.h) ----
  // Writes k(n_tok, n_head_kv, d_k) and v(n_tok, n_head_kv, d_v) of this batch into the raw
  // pages the host assigned (slot_of_token); keys arrive after RoPE.
  virtual void kv_store(const KVLayerView& kv, const KVTokenSlot* slots, int64_t n_tok, const float* k,
                        const float* v) = 0;
  // Encodes full blocks into the format's compressed slots (kv/kv_view.h KVFinalizeJob); a job
  // whose encoding does not fit reports `fits = false` and its raw page stays in use.
  virtual void kv_finalize(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs) = 0;
  // out(n_tok, n_head, d_v) = softmax(q·Kᵀ·scale + mask) · V per sequence, reading the cache in
  // whatever mix of compressed slots and raw pages the block table says (one softmax over all).
  virtual void attention(const KVLayerView& kv, const AttentionArgs& args, const AttnSeq* seqs, int32_t n_seqs,
                         const float* q, float* out) = 0;

  // ---- fused ops (backend.cpp holds their references, composed of the ops above) ----
  // Norm + activation quantize + its consumers: xn(n_tok, dim) = rms_norm(x)·norm_w, then
  // y_i(n_tok, w_i.n_rows) = xn·w_iᵀ (+ bias_i) for i < n_w — Q/K/V, or gate/up. A backend
  // quantizes xn once for all of them.
  virtual void norm_matmuls(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim, int n_w,
                            const WeightView* w, const float* const* bias, float* const* y, float* xn);
  // Q/K norm + RoPE + cache append: per-head RMSNorm of q(n_tok, n_head, d) and k(n_tok, n_head_kv, d)
  // when q_norm/k_norm are given, RoPE of both at positions pos, then k and v stored in the cache.
  virtual void qk_rope_store(float* q, float* k, const float* v, int64_t n_tok, int32_t n_head, const float* q_norm,
                             const float* k_norm, float eps, const int32_t* pos, const RopeParams& rope,
                             const KVLayerView& kv, const KVTokenSlot* slots);
  // The attention block's input: norm_matmuls of x with w = {Q, K, V} (bias as there) into q, k,
  // v, then qk_rope_store of them — the reference is exactly that composition; a backend may run
  // it in fewer launches.
  virtual void norm_qkv_rope_store(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim,
                                   const WeightView* w, const float* const* bias, float* q, float* k, float* v,
                                   float* xn, int32_t n_head, const float* q_norm, const float* k_norm,
                                   const int32_t* pos, const RopeParams& rope, const KVLayerView& kv,
                                   const KVTokenSlot* slots);
  // Residual projection: y(n_tok, w.n_rows) += x(n_tok, w.n_cols) · wᵀ; tmp (n_tok, w.n_rows) is work
  // space (the reference: matmul into tmp, then add).
  virtual void matmul_add(const WeightView& w, const float* x, int64_t n_tok, float* y, float* tmp);
  // Gate/up + activation: h(n_tok, n_ff) = act(rms_norm(x)·gateᵀ) ⊙ (rms_norm(x)·upᵀ); `up_scratch`
  // (n_tok, n_ff) and xn (n_tok, dim) are work space.
  virtual void norm_gate_up(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim,
                            const WeightView& gate, const WeightView& up, Activation act, float* h, float* up_scratch,
                            float* xn);
};

}  // namespace gaacrt
