// config.h — what distinguishes one architecture from another, as data.
//
// The forward pass is written once; llama, qwen2, qwen3 and gemma3 differ only in these fields
// (shared/spec/gguf.md §1.2, §3). load_config() reads them from GGUF metadata with llama.cpp's
// defaults and refuses an unknown architecture by name.
#pragma once
#include <string>
#include <vector>

#include "backend/backend.h"

namespace gaacrt {

class GGUFFile;

struct ModelConfig {
  std::string arch;             // "llama", "qwen2", "qwen3", "gemma3"
  std::string name;             // general.name
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim_k = 0;       // key_length (default n_embd / n_head)
  int32_t head_dim_v = 0;
  int32_t n_ff = 0;
  int32_t n_ctx_train = 0;
  float rms_eps = 1e-5f;

  RopeParams rope;              // global layers (freq_factors filled by the model from rope_freqs)
  RopeParams rope_swa;          // sliding-window layers (gemma3: own base, never scaled)

  bool qk_norm = false;         // per-head RMSNorm of q and k before RoPE (qwen3, gemma3)
  bool post_norms = false;      // post_attention_norm / post_ffw_norm on sub-layer outputs (gemma3)
  Activation act = Activation::SiLU;
  float embed_scale = 1.f;      // token embeddings are multiplied by this (gemma3: sqrt(n_embd))
  float attn_scale = 0.f;       // q·k scale (1/sqrt(head_dim) unless the arch says otherwise)
  float final_logit_softcap = 0.f;

  int32_t sliding_window = 0;   // tokens, including the current one; 0 = none
  std::vector<bool> layer_is_swa;  // per layer

  bool is_swa(int il) const { return sliding_window > 0 && layer_is_swa[il]; }
  const RopeParams& rope_for(int il) const { return is_swa(il) ? rope_swa : rope; }
};

// Throws Error("model", "unknown_architecture" | "bad_hparams", ...) naming the key or value.
ModelConfig load_config(const GGUFFile& f);

}  // namespace gaacrt
