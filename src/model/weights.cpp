// weights.cpp — load, validate and place the tensors named in spec/gguf.md §1.2.
#include "weights.h"

#include <cstring>

#include "common/error.h"
#include "common/half.h"
#include "gguf/gguf_reader.h"

namespace gaacrt {
namespace {

std::string shape_str(const GGUFTensorInfo& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

class Loader {
 public:
  Loader(const GGUFFile& f, Backend& be, std::vector<void*>& owned, uint64_t& bytes)
      : f_(f), be_(be), owned_(owned), bytes_(bytes) {}

  const GGUFTensorInfo* find(const std::string& name, bool required) {
    const GGUFTensorInfo* t = f_.find_tensor(name);
    if (!t && required)
      throw Error("model", "missing_tensor", strfmt("%s: required tensor '%s' is missing", f_.path().c_str(), name.c_str()));
    return t;
  }

  // A 2-D weight (n_rows, n_cols) of any supported type.
  WeightView matrix(const std::string& name, int64_t n_cols, int64_t n_rows, bool required = true) {
    const GGUFTensorInfo* t = find(name, required);
    if (!t) return {};
    if (t->ne[0] != n_cols || t->n_rows() != n_rows || t->ne[2] != 1 || t->ne[3] != 1)
      throw Error("model", "bad_shape", strfmt("tensor '%s' has shape %s, expected [%lld, %lld]", name.c_str(),
                                               shape_str(*t).c_str(), (long long)n_cols, (long long)n_rows));
    const TypeTraits* tr = type_traits(t->type);
    if (!tr || !tr->supported)
      throw Error("model", "unsupported_type", strfmt("tensor '%s' has type %s, which gaacrt does not support "
                                                      "(supported: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 iq4_nl iq4_xs "
                                                      "q4_K q5_K q6_K)", name.c_str(), type_name(t->type)));
    WeightView w;
    w.type = t->type;
    w.n_rows = n_rows;
    w.n_cols = n_cols;
    w.row_stride = row_bytes(t->type, n_cols);
    w.data = t->data;
    return place(w, t->nbytes);
  }

  // A 1-D fp32 vector (norms, biases, rope_freqs); F16/BF16 are widened.
  const float* vector(const std::string& name, int64_t n, bool required = true) {
    const GGUFTensorInfo* t = find(name, required);
    if (!t) return nullptr;
    if (t->n_elements() != n)
      throw Error("model", "bad_shape", strfmt("tensor '%s' has shape %s, expected [%lld]", name.c_str(),
                                               shape_str(*t).c_str(), (long long)n));
    if (t->type == GGMLType::F32) {
      WeightView v;  // one row of n floats
      v.n_rows = 1;
      v.n_cols = n;
      v.row_stride = t->nbytes;
      v.data = t->data;
      return static_cast<const float*>(place(v, t->nbytes).data);
    }
    if (t->type != GGMLType::F16 && t->type != GGMLType::BF16)
      throw Error("model", "unsupported_type", strfmt("tensor '%s': a %s vector (expected f32/f16/bf16)", name.c_str(),
                                                      type_name(t->type)));
    std::vector<float> tmp(n);
    const uint16_t* h = reinterpret_cast<const uint16_t*>(t->data);
    for (int64_t i = 0; i < n; ++i) tmp[i] = t->type == GGMLType::F16 ? fp16_to_f32(h[i]) : bf16_to_f32(h[i]);
    return static_cast<const float*>(copy(tmp.data(), n * sizeof(float)));
  }

 private:
  // The backend places the mapped bytes (Backend::place_weight: host-memory backends read the
  // mapping in place, others get a device copy, maybe regrouped); what it allocates is the model's.
  WeightView place(WeightView w, size_t nbytes) {
    bytes_ += nbytes;
    void* owned = nullptr;
    w = be_.place_weight(w, &owned);
    if (owned) owned_.push_back(owned);
    return w;
  }
  const void* copy(const void* src, size_t n) {
    void* dst = be_.alloc(n);
    owned_.push_back(dst);
    be_.upload(dst, src, n);
    return dst;
  }

  const GGUFFile& f_;
  Backend& be_;
  std::vector<void*>& owned_;
  uint64_t& bytes_;
};

}  // namespace

ModelWeights::ModelWeights(const GGUFFile& f, ModelConfig& c, Backend& be, const std::function<bool(float)>& progress)
    : be_(be) {
  try {
    Loader ld(f, be, owned_, bytes);
    const GGUFTensorInfo* emb = ld.find("token_embd.weight", true);
    if (c.n_vocab == 0) c.n_vocab = (int32_t)emb->ne[1];
    token_embd = ld.matrix("token_embd.weight", c.n_embd, c.n_vocab);
    output = ld.matrix("output.weight", c.n_embd, c.n_vocab, false);
    if (output.empty()) output = token_embd;  // tied embeddings (SmolLM2, Qwen ≤ 4B, Gemma3)
    output_norm = ld.vector("output_norm.weight", c.n_embd);
    if (ld.find("rope_freqs.weight", false)) {
      rope_freqs = ld.vector("rope_freqs.weight", c.rope.n_rot / 2);
      c.rope.freq_factors = rope_freqs;  // llama.cpp applies them on every layer of llama
    }

    const int64_t q_dim = (int64_t)c.n_head * c.head_dim_k, k_dim = (int64_t)c.n_head_kv * c.head_dim_k;
    const int64_t v_dim = (int64_t)c.n_head_kv * c.head_dim_v, o_dim = (int64_t)c.n_head * c.head_dim_v;
    layers.resize(c.n_layer);
    for (int il = 0; il < c.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      LayerWeights& L = layers[il];
      L.attn_norm = ld.vector(p + "attn_norm.weight", c.n_embd);
      L.wq = ld.matrix(p + "attn_q.weight", c.n_embd, q_dim);
      L.wk = ld.matrix(p + "attn_k.weight", c.n_embd, k_dim);
      L.wv = ld.matrix(p + "attn_v.weight", c.n_embd, v_dim);
      L.wo = ld.matrix(p + "attn_output.weight", o_dim, c.n_embd);
      L.bq = ld.vector(p + "attn_q.bias", q_dim, false);
      L.bk = ld.vector(p + "attn_k.bias", k_dim, false);
      L.bv = ld.vector(p + "attn_v.bias", v_dim, false);
      if (c.qk_norm) {
        L.q_norm = ld.vector(p + "attn_q_norm.weight", c.head_dim_k);
        L.k_norm = ld.vector(p + "attn_k_norm.weight", c.head_dim_k);
      }
      L.ffn_norm = ld.vector(p + "ffn_norm.weight", c.n_embd);
      L.w_gate = ld.matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff);
      L.w_up = ld.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
      L.w_down = ld.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
      if (c.post_norms) {
        L.post_attn_norm = ld.vector(p + "post_attention_norm.weight", c.n_embd);
        L.post_ffw_norm = ld.vector(p + "post_ffw_norm.weight", c.n_embd);
      }
      if (progress && !progress(0.1f + 0.9f * (float)(il + 1) / (float)c.n_layer))
        throw Error("model", "aborted", "loading cancelled by the progress callback");
    }
  } catch (...) {
    for (void* p : owned_) be_.free(p);
    throw;
  }
}

ModelWeights::~ModelWeights() {
  for (void* p : owned_) be_.free(p);
}

}  // namespace gaacrt
