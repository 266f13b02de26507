// weights.h — the tensors of a model, checked against its config and placed in backend memory.
//
// On a backend that shares host memory (CPU) the views point straight into the mapped GGUF; on a
// GPU each tensor is uploaded once. Norm weights, biases and rope_freqs are converted to fp32.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "config.h"

namespace gaacrt {

class GGUFFile;

struct LayerWeights {
  const float* attn_norm = nullptr;            // (n_embd)
  WeightView wq, wk, wv, wo;                   // (n_head*dk, n_embd) (n_head_kv*dk, ..) (.., n_embd) (n_embd, n_head*dv)
  const float* bq = nullptr;                   // (n_head*dk) or null (qwen2)
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;               // (dk) or null (qwen3, gemma3)
  const float* k_norm = nullptr;
  const float* post_attn_norm = nullptr;       // (n_embd) or null (gemma3)
  const float* ffn_norm = nullptr;             // (n_embd)
  WeightView w_gate, w_up, w_down;             // (n_ff, n_embd) (n_ff, n_embd) (n_embd, n_ff)
  const float* post_ffw_norm = nullptr;        // (n_embd) or null
};

class ModelWeights {
 public:
  // Validates every tensor's presence, type and shape; throws Error("model", ...) naming it.
  // `progress` (may be empty) is called after each layer; returning false cancels the load.
  ModelWeights(const GGUFFile& f, ModelConfig& cfg, Backend& be, const std::function<bool(float)>& progress = {});
  ~ModelWeights();
  ModelWeights(const ModelWeights&) = delete;
  ModelWeights& operator=(const ModelWeights&) = delete;

  WeightView token_embd;                       // (n_vocab, n_embd)
  WeightView output;                           // (n_vocab, n_embd); token_embd when tied
  const float* output_norm = nullptr;          // (n_embd)
  const float* rope_freqs = nullptr;           // (n_rot/2) or null
  std::vector<LayerWeights> layers;
  uint64_t bytes = 0;                          // weight bytes in backend memory (or mapped)

 private:
  Backend& be_;
  std::vector<void*> owned_;                   // device allocations to free
};

}  // namespace gaacrt
