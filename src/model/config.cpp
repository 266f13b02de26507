// config.cpp — ModelConfig from GGUF metadata, per architecture (spec/gguf.md §1.2, §3).
#include "config.h"

#include <cmath>

#include "common/error.h"
#include "gguf/gguf_reader.h"

namespace gaacrt {
namespace {

// A hyperparameter that may be a scalar or a per-layer array (llama.cpp accepts both); we
// support uniform values only and say so if layers differ.
int64_t uniform_int(const GGUFFile& f, const std::string& key, int64_t dflt, bool required) {
  const GGUFValue* v = f.find(key);
  if (!v) {
    if (required) throw Error("model", "bad_hparams", strfmt("missing required metadata '%s'", key.c_str()));
    return dflt;
  }
  if (!v->is_array()) return v->as_int(key);
  if (v->count == 0) throw Error("model", "bad_hparams", strfmt("'%s' is an empty array", key.c_str()));
  const int64_t first = v->int_at(0);
  for (uint64_t k = 1; k < v->count; ++k)
    if (v->int_at(k) != first)
      throw Error("model", "bad_hparams", strfmt("'%s' differs between layers; per-layer sizes are not supported",
                                                 key.c_str()));
  return first;
}

void check_positive(int64_t v, const char* what) {
  if (v <= 0 || v > (1 << 24)) throw Error("model", "bad_hparams", strfmt("%s = %lld is out of range", what, (long long)v));
}

}  // namespace

ModelConfig load_config(const GGUFFile& f) {
  ModelConfig c;
  c.arch = f.get_string("general.architecture");
  if (c.arch != "llama" && c.arch != "qwen2" && c.arch != "qwen3" && c.arch != "gemma3")
    throw Error("model", "unknown_architecture",
                strfmt("%s: architecture '%s' is not supported (supported: llama, qwen2, qwen3, gemma3)",
                       f.path().c_str(), c.arch.c_str()));
  const std::string a = c.arch + ".";
  c.name = f.get_string("general.name");
  c.n_embd = (int32_t)uniform_int(f, a + "embedding_length", 0, true);
  c.n_layer = (int32_t)uniform_int(f, a + "block_count", 0, true);
  c.n_head = (int32_t)uniform_int(f, a + "attention.head_count", 0, true);
  c.n_head_kv = (int32_t)uniform_int(f, a + "attention.head_count_kv", c.n_head, false);
  c.n_ff = (int32_t)uniform_int(f, a + "feed_forward_length", 0, true);
  c.n_ctx_train = (int32_t)uniform_int(f, a + "context_length", 0, true);
  check_positive(c.n_embd, "embedding_length");
  check_positive(c.n_layer, "block_count");
  check_positive(c.n_head, "attention.head_count");
  check_positive(c.n_head_kv, "attention.head_count_kv");
  check_positive(c.n_ff, "feed_forward_length");
  if (c.n_head % c.n_head_kv != 0)
    throw Error("model", "bad_hparams", strfmt("head_count %d is not a multiple of head_count_kv %d", c.n_head, c.n_head_kv));
  c.head_dim_k = (int32_t)uniform_int(f, a + "attention.key_length", c.n_embd / c.n_head, false);
  c.head_dim_v = (int32_t)uniform_int(f, a + "attention.value_length", c.n_embd / c.n_head, false);
  check_positive(c.head_dim_k, "attention.key_length");
  check_positive(c.head_dim_v, "attention.value_length");
  if (c.head_dim_k % 2 || (c.head_dim_k > KV_TILE_MAX_DIM && c.head_dim_k % KV_TILE_MAX_DIM) ||
      (c.head_dim_v > KV_TILE_MAX_DIM && c.head_dim_v % KV_TILE_MAX_DIM) || c.head_dim_k % 8 || c.head_dim_v % 8)
    throw Error("model", "bad_hparams", strfmt("head dims %d/%d: must be multiples of 8, and of 128 when above 128",
                                               c.head_dim_k, c.head_dim_v));
  {
    const GGUFValue* eps = f.find(a + "attention.layer_norm_rms_epsilon");
    if (!eps) throw Error("model", "bad_hparams", strfmt("missing required metadata '%sattention.layer_norm_rms_epsilon'", a.c_str()));
    c.rms_eps = (float)eps->as_float();
  }

  // Vocabulary size: the token list when present, else the embedding rows (checked by the weights).
  if (const GGUFValue* toks = f.find("tokenizer.ggml.tokens")) c.n_vocab = (int32_t)toks->count;
  else c.n_vocab = (int32_t)uniform_int(f, a + "vocab_size", 0, false);

  // RoPE (spec §3.1). llama rotates adjacent pairs (its converter permutes Q/K); the rest NEOX.
  RopeParams& r = c.rope;
  r.style = c.arch == "llama" ? RopeStyle::Norm : RopeStyle::Neox;
  r.n_rot = (int32_t)uniform_int(f, a + "rope.dimension_count", c.head_dim_k, false);
  if (r.n_rot <= 0 || r.n_rot > c.head_dim_k || r.n_rot % 2)
    throw Error("model", "bad_hparams", strfmt("rope.dimension_count %d invalid for head dim %d", r.n_rot, c.head_dim_k));
  r.base = (float)f.get_float(a + "rope.freq_base", 10000.0);
  r.n_ctx_orig = (int32_t)f.get_int(a + "rope.scaling.original_context_length", c.n_ctx_train);
  const std::string scaling = f.get_string(a + "rope.scaling.type", "linear");
  double factor = f.get_float(a + "rope.scaling.factor", 0.0);
  if (factor == 0.0) factor = f.get_float(a + "rope.scale_linear", 0.0);
  if (scaling != "none" && scaling != "linear" && scaling != "yarn")
    throw Error("model", "bad_hparams", strfmt("rope.scaling.type '%s' is not supported (none, linear, yarn)", scaling.c_str()));
  r.freq_scale = (scaling != "none" && factor > 0.0) ? (float)(1.0 / factor) : 1.f;
  if (scaling == "yarn") {
    r.ext_factor = (float)f.get_float(a + "rope.scaling.yarn_ext_factor", 1.0);
    r.attn_factor = (float)f.get_float(a + "rope.scaling.attn_factor", 1.0);
    r.beta_fast = (float)f.get_float(a + "rope.scaling.yarn_beta_fast", 32.0);
    r.beta_slow = (float)f.get_float(a + "rope.scaling.yarn_beta_slow", 1.0);
  }
  c.rope_swa = r;

  c.attn_scale = 1.f / std::sqrt((float)c.head_dim_k);
  if (const GGUFValue* s = f.find(a + "attention.scale")) c.attn_scale = (float)s->as_float();
  c.layer_is_swa.assign(c.n_layer, false);

  if (c.arch == "qwen3") c.qk_norm = true;
  if (c.arch == "gemma3") {
    c.qk_norm = true;
    c.post_norms = true;
    c.act = Activation::GeluTanh;
    c.embed_scale = std::sqrt((float)c.n_embd);
    // The query is scaled by f_attention_scale and attention uses 1.0; identical to scaling q·k.
    c.attn_scale = c.n_layer == 62 ? 1.f / std::sqrt((float)c.n_embd / c.n_head) : 1.f / std::sqrt((float)c.head_dim_k);
    c.final_logit_softcap = (float)f.get_float(a + "final_logit_softcapping", 0.0);
    c.sliding_window = (int32_t)f.get_int(a + "attention.sliding_window", 0);
    const int64_t pattern = f.get_int(a + "attention.sliding_window_pattern", 6);
    if (c.sliding_window > 0)
      for (int il = 0; il < c.n_layer; ++il) c.layer_is_swa[il] = pattern > 0 && (il % pattern) < pattern - 1;
    // Local layers: their own base, never scaled (spec §3.3).
    c.rope_swa.base = (float)f.get_float(a + "rope.freq_base_swa", 10000.0);
    c.rope_swa.freq_scale = 1.f;
    c.rope_swa.ext_factor = 0.f;
  }
  return c;
}

}  // namespace gaacrt
