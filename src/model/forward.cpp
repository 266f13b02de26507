// forward.cpp — embed, then for each layer: attention block and feed-forward block, then the
// LM head (spec/gguf.md §3.2–3.3). Architecture differences come from ModelConfig only.
#include "forward.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace gaacrt {

namespace {

// Where a step's metadata lives in the metadata buffer, for n tokens of n_seqs sequences.
struct MetaLayout {
  size_t ids, pos, slots, seqs, total;
};
MetaLayout meta_layout(size_t n, size_t n_seqs, size_t n_layer) {
  auto up = [](size_t x) { return (x + 15) & ~size_t(15); };
  MetaLayout m;
  m.ids = 0;
  m.pos = up(n * sizeof(int32_t));
  m.slots = up(m.pos + n * sizeof(int32_t));
  m.seqs = up(m.slots + n_layer * n * sizeof(KVTokenSlot));
  m.total = m.seqs + n_layer * n_seqs * sizeof(AttnSeq);
  return m;
}

}  // namespace

bool Forward::StepKey::operator==(const StepKey& o) const {
  return epoch == o.epoch && shape == o.shape && views.size() == o.views.size() &&
         (views.empty() || std::memcmp(views.data(), o.views.data(), views.size() * sizeof(KVLayerView)) == 0);
}

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
  // Every layer's slots and sequences, so a step uploads its metadata once (not per layer).
  meta_bytes_ = meta_layout(T, T, (size_t)c.n_layer).total;
  void* p = be_.alloc(meta_bytes_);
  allocs_.push_back(p);
  meta_ = static_cast<uint8_t*>(p);
  host_meta_ = static_cast<uint8_t*>(be_.alloc_host(meta_bytes_));
}

Forward::~Forward() {
  graphs_.clear();
  try {
    be_.synchronize();  // an upload from host_meta_ may still be in flight
  } catch (...) {
  }
  be_.free_host(host_meta_);
  for (void* p : allocs_) be_.free(p);
}

float* Forward::buf(size_t n) {
  void* p = be_.alloc(n * sizeof(float));
  allocs_.push_back(p);
  return static_cast<float*>(p);
}

Forward::StepKey Forward::make_key(const Batch& b, KVCache& cache, const std::vector<AttnSeq>& seqs) const {
  StepKey k;
  k.shape.reserve(2 + seqs.size() + b.logits.size());
  k.shape.push_back(b.size());
  k.shape.push_back((int32_t)seqs.size());
  for (const AttnSeq& s : seqs) k.shape.push_back(s.n_q);
  for (uint8_t l : b.logits) k.shape.push_back(l ? 1 : 0);
  k.views.reserve(cfg_.n_layer);
  for (int il = 0; il < cfg_.n_layer; ++il) k.views.push_back(cache.layer_view(il));
  k.epoch = be_.capture_epoch();
  return k;
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
  int32_t n_out = 0;
  for (int32_t t = 0; t < n; ++t) n_out += b.logits[t] ? 1 : 0;

  // The step's metadata, built on the host and uploaded in one copy: ids, positions, then per
  // layer the slots (layer, token) and sequences (layer, seq).
  const size_t ns = seqs.size();
  const MetaLayout m = meta_layout((size_t)n, ns, (size_t)c.n_layer);
  // The previous step's upload reads host_meta_ asynchronously; a step that downloaded logits
  // has waited for it, one without (a prefill chunk) has not.
  if (meta_in_flight_) be_.synchronize();
  std::memcpy(host_meta_ + m.ids, b.tokens.data(), n * sizeof(int32_t));
  std::memcpy(host_meta_ + m.pos, b.pos.data(), n * sizeof(int32_t));
  KVTokenSlot* hslots = reinterpret_cast<KVTokenSlot*>(host_meta_ + m.slots);
  AttnSeq* hseqs = reinterpret_cast<AttnSeq*>(host_meta_ + m.seqs);
  for (int il = 0; il < c.n_layer; ++il) {
    for (int32_t t = 0; t < n; ++t) hslots[il * n + t] = {cache.table(b.seq[t], il), b.pos[t]};
    for (size_t s = 0; s < ns; ++s) {
      hseqs[il * ns + s] = seqs[s];
      hseqs[il * ns + s].table = cache.table(seq_ids[s], il);
    }
  }
  be_.upload(meta_, host_meta_, m.total);
  meta_in_flight_ = true;
  const auto* ids = reinterpret_cast<const int32_t*>(meta_ + m.ids);
  const auto* pos = reinterpret_cast<const int32_t*>(meta_ + m.pos);
  const auto* slots = reinterpret_cast<const KVTokenSlot*>(meta_ + m.slots);
  const auto* dseqs = reinterpret_cast<const AttnSeq*>(meta_ + m.seqs);
  int32_t max_q = 0;  // the largest sequence's tokens: AttentionArgs::max_q, a tight bound
  for (const AttnSeq& sq : seqs) max_q = std::max(max_q, sq.n_q);
  // AttentionArgs::max_len, for the steps never recorded as graphs (a replay at later positions
  // would carry a stale bound); 0 for the others.
  int32_t max_len = 0;
  if (n > kMaxGraphTokens)
    for (const AttnSeq& sq : seqs) max_len = std::max(max_len, sq.pos0 + sq.n_q);
  auto step = [&] { enqueue(b, cache, (int32_t)ns, ids, pos, slots, dseqs, n_out, max_q, max_len); };

  // Decode-sized steps: replay the step recorded for this key, or record it the second time the
  // key is seen (the first, eager, run has grown the backend's scratch to what the step needs).
  bool done = false;
  if (n <= kMaxGraphTokens && !graphs_broken_) {
    StepKey key = make_key(b, cache, seqs);
    graphs_.erase(std::remove_if(graphs_.begin(), graphs_.end(), [&](const Recorded& r) { return r.key.epoch != key.epoch; }),
                  graphs_.end());
    auto it = std::find_if(graphs_.begin(), graphs_.end(), [&](const Recorded& r) { return r.key == key; });
    if (it != graphs_.end()) {
      done = be_.replay(*it->graph);
    } else if (key == seen_ && be_.begin_capture()) {
      std::unique_ptr<StepGraph> g;
      bool threw = false;
      try {
        step();
      } catch (...) {
        threw = true;  // recorded, not run: the eager run below reports it if it is real
      }
      g = be_.end_capture();
      if (threw || !g) {
        graphs_broken_ = true;
      } else {
        ++n_captures_;
        done = be_.replay(*g);
        if (graphs_.size() >= kMaxGraphs) graphs_.erase(graphs_.begin());
        graphs_.push_back({std::move(key), std::move(g)});
      }
    }
    if (done) {
      ++n_replays_;
    } else {
      step();
      seen_ = make_key(b, cache, seqs);  // after the run: its scratch epoch
    }
  } else {
    step();
  }
  if (n_out > 0) {
    be_.download(logits_out, logits_, (size_t)n_out * c.n_vocab * sizeof(float));
    meta_in_flight_ = false;
  }
}

void Forward::enqueue(const Batch& b, KVCache& cache, int32_t ns, const int32_t* ids, const int32_t* pos,
                      const KVTokenSlot* slots_all, const AttnSeq* dseqs, int32_t n_out, int32_t max_q,
                      int32_t max_len) {
  const ModelConfig& c = cfg_;
  const int32_t n = b.size();
  be_.get_rows(w_.token_embd, ids, n, c.embed_scale, x_);
  // x += w . in: one fused matmul_add, or (Gemma's post-norms) matmul, norm of the block output, add.
  auto residual = [&](const WeightView& w, const float* in, const float* post_norm) {
    if (!c.post_norms) return be_.matmul_add(w, in, n, x_, o_);
    be_.matmul(w, in, n, o_, nullptr);
    be_.rms_norm(o_, post_norm, c.rms_eps, n, c.n_embd, o_);
    be_.add(x_, o_, (int64_t)n * c.n_embd);
  };

  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& L = w_.layers[il];
    const KVLayerView kv = cache.layer_view(il);
    const KVTokenSlot* slots = slots_all + il * n;
    const AttnSeq* lseqs = dseqs + il * ns;

    // ---- attention block ----
    const WeightView qkv_w[3] = {L.wq, L.wk, L.wv};
    const float* qkv_b[3] = {L.bq, L.bk, L.bv};
    be_.norm_qkv_rope_store(x_, L.attn_norm, c.rms_eps, n, c.n_embd, qkv_w, qkv_b, q_, k_, v_, xn_, c.n_head, L.q_norm,
                            L.k_norm, pos, c.rope_for(il), kv, slots);
    const AttentionArgs args{c.n_head, c.attn_scale, c.is_swa(il) ? c.sliding_window : 0, 0.f, max_q, max_len};
    be_.attention(kv, args, lseqs, ns, q_, attn_);
    residual(L.wo, attn_, L.post_attn_norm);

    // ---- feed-forward block ----
    be_.norm_gate_up(x_, L.ffn_norm, c.rms_eps, n, c.n_embd, L.w_gate, L.w_up, c.act, gate_, up_, xn_);
    residual(L.w_down, gate_, L.post_ffw_norm);
  }

  // ---- LM head on the rows that want logits ----
  if (n_out == 0) return;
  if (n_out == n) {
    be_.rms_norm(x_, w_.output_norm, c.rms_eps, n, c.n_embd, xn_);  // one block per row: the same as row by row
  } else {
    int32_t r = 0;
    for (int32_t t = 0; t < n; ++t) {
      if (!b.logits[t]) continue;
      be_.rms_norm(x_ + (int64_t)t * c.n_embd, w_.output_norm, c.rms_eps, 1, c.n_embd, xn_ + (int64_t)r * c.n_embd);
      ++r;
    }
  }
  be_.matmul(w_.output, xn_, n_out, logits_, nullptr);
  if (c.final_logit_softcap > 0.f) be_.softcap(logits_, (int64_t)n_out * c.n_vocab, c.final_logit_softcap);
}

}  // namespace gaacrt
