// forward.cpp — embed, then for each layer: attention block and feed-forward block, then the
// LM head (spec/gguf.md §3.2–3.3). Architecture differences come from ModelConfig only.
#include "forward.h"

#include <cstring>

#include "common/error.h"

namespace gaacrt {

Forward::Forward(const ModelConfig& c, const ModelWeights& w, Backend& be, int32_t max_tokens)
    : cfg_(c), w_(w), be_(be), max_tok_(max_tokens) {
  const size_t T = (size_t)max_tokens;
  x_ = buf(T * c.n_embd);
  xn_ = buf(T * c.n_embd);
  q_ = buf(T * c.n_head * c.head_dim_k);
  k_ = buf(T * c.n_head_kv * c.head_dim_k);
  v_ = buf(T * c.n_head_kv * c.head_dim_v);
  attn_ = buf(T * c.n_head * c.head_dim_v);
  o_ = buf(T * c.n_embd);
  gate_ = buf(T * c.n_ff);
  up_ = buf(T * c.n_ff);
  logits_ = buf(T * c.n_vocab);
  ids_ = static_cast<int32_t*>(static_cast<void*>(buf(T)));
  pos_ = static_cast<int32_t*>(static_cast<void*>(buf(T)));
  // Every layer's slots and sequences, so a step uploads its metadata once (not per layer).
  const size_t L = (size_t)c.n_layer;
  meta_bytes_ = L * T * (sizeof(KVTokenSlot) + sizeof(AttnSeq));
  void* p = be_.alloc(meta_bytes_);
  allocs_.push_back(p);
  slots_ = static_cast<KVTokenSlot*>(p);  // this step's slots, then its sequences (run())
  host_meta_.resize(meta_bytes_);
}

Forward::~Forward() {
  for (void* p : allocs_) be_.free(p);
}

float* Forward::buf(size_t n) {
  void* p = be_.alloc(n * sizeof(float));
  allocs_.push_back(p);
  return static_cast<float*>(p);
}

void Forward::run(const Batch& b, KVCache& cache, float* logits_out) {
  const ModelConfig& c = cfg_;
  const int32_t n = b.size();
  if (n <= 0) return;
  if (n > max_tok_) throw Error("model", "invalid_argument", strfmt("batch of %d tokens > the %d this pass was sized for", n, max_tok_));
  for (int32_t t = 0; t < n; ++t)
    if (b.tokens[t] < 0 || b.tokens[t] >= c.n_vocab)
      throw Error("model", "invalid_argument", strfmt("token id %d out of range [0, %d)", b.tokens[t], c.n_vocab));

  // Sequences: contiguous runs of the batch.
  std::vector<AttnSeq> seqs;
  std::vector<int32_t> seq_ids;
  for (int32_t t = 0; t < n; ++t) {
    if (t == 0 || b.seq[t] != b.seq[t - 1]) {
      seqs.push_back({nullptr, t, 0, b.pos[t]});
      seq_ids.push_back(b.seq[t]);
    } else if (b.pos[t] != b.pos[t - 1] + 1) {
      throw Error("model", "invalid_argument", "a sequence's tokens must be contiguous and in position order");
    }
    seqs.back().n_q++;
  }
  be_.upload(ids_, b.tokens.data(), n * sizeof(int32_t));
  be_.upload(pos_, b.pos.data(), n * sizeof(int32_t));

  be_.get_rows(w_.token_embd, ids_, n, c.embed_scale, x_);

  // Per-layer metadata for the whole step, built on the host and uploaded in one copy:
  // slots (layer, token) then sequences (layer, seq), packed for this step's n and n_seqs.
  const size_t ns = seqs.size();
  KVTokenSlot* hslots = reinterpret_cast<KVTokenSlot*>(host_meta_.data());
  AttnSeq* hseqs = reinterpret_cast<AttnSeq*>(host_meta_.data() + (size_t)c.n_layer * n * sizeof(KVTokenSlot));
  for (int il = 0; il < c.n_layer; ++il) {
    for (int32_t t = 0; t < n; ++t) hslots[il * n + t] = {cache.table(b.seq[t], il), b.pos[t]};
    for (size_t s = 0; s < ns; ++s) {
      hseqs[il * ns + s] = seqs[s];
      hseqs[il * ns + s].table = cache.table(seq_ids[s], il);
    }
  }
  const size_t slot_bytes = (size_t)c.n_layer * n * sizeof(KVTokenSlot);
  be_.upload(slots_, host_meta_.data(), slot_bytes + (size_t)c.n_layer * ns * sizeof(AttnSeq));
  const AttnSeq* dseqs = reinterpret_cast<const AttnSeq*>(reinterpret_cast<const uint8_t*>(slots_) + slot_bytes);

  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& L = w_.layers[il];
    const KVLayerView kv = cache.layer_view(il);
    const KVTokenSlot* slots = slots_ + il * n;
    const AttnSeq* lseqs = dseqs + il * ns;

    // ---- attention block ----
    const WeightView qkv_w[3] = {L.wq, L.wk, L.wv};
    const float* qkv_b[3] = {L.bq, L.bk, L.bv};
    float* qkv_y[3] = {q_, k_, v_};
    be_.norm_matmuls(x_, L.attn_norm, c.rms_eps, n, c.n_embd, 3, qkv_w, qkv_b, qkv_y, xn_);
    be_.qk_rope_store(q_, k_, v_, n, c.n_head, L.q_norm, L.k_norm, c.rms_eps, pos_, c.rope_for(il), kv, slots);
    const AttentionArgs args{c.n_head, c.attn_scale, c.is_swa(il) ? c.sliding_window : 0, 0.f};
    be_.attention(kv, args, lseqs, (int32_t)seqs.size(), q_, attn_);
    be_.matmul(L.wo, attn_, n, o_, nullptr);
    if (c.post_norms) be_.rms_norm(o_, L.post_attn_norm, c.rms_eps, n, c.n_embd, o_);
    be_.add(x_, o_, (int64_t)n * c.n_embd);

    // ---- feed-forward block ----
    be_.norm_gate_up(x_, L.ffn_norm, c.rms_eps, n, c.n_embd, L.w_gate, L.w_up, c.act, gate_, up_, xn_);
    be_.matmul(L.w_down, gate_, n, o_, nullptr);
    if (c.post_norms) be_.rms_norm(o_, L.post_ffw_norm, c.rms_eps, n, c.n_embd, o_);
    be_.add(x_, o_, (int64_t)n * c.n_embd);
  }

  // ---- LM head on the rows that want logits ----
  int32_t n_out = 0;
  for (int32_t t = 0; t < n; ++t) {
    if (!b.logits[t]) continue;
    be_.rms_norm(x_ + (int64_t)t * c.n_embd, w_.output_norm, c.rms_eps, 1, c.n_embd, xn_ + (int64_t)n_out * c.n_embd);
    ++n_out;
  }
  if (n_out == 0) return;
  be_.matmul(w_.output, xn_, n_out, logits_, nullptr);
  if (c.final_logit_softcap > 0.f) be_.softcap(logits_, (int64_t)n_out * c.n_vocab, c.final_logit_softcap);
  be_.download(logits_out, logits_, (size_t)n_out * c.n_vocab * sizeof(float));
}

}  // namespace gaacrt
