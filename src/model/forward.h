// forward.h — the one forward pass, written against the backend op interface.
//
// A Batch holds tokens of one or more sequences; a sequence's tokens are contiguous and in
// position order. The pass appends their K/V to the cache (the caller reserved the pages) and
// returns logits for the rows that asked for them. Decode is a batch of one token per sequence;
// prefill is a chunk of one sequence's prompt.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "config.h"
#include "kv/kv_cache.h"
#include "weights.h"

namespace gaacrt {

struct Batch {
  std::vector<int32_t> tokens;   // (n_tok)
  std::vector<int32_t> pos;      // (n_tok) position of each token in its sequence
  std::vector<int32_t> seq;      // (n_tok) KV-cache sequence id
  std::vector<uint8_t> logits;   // (n_tok) 1 = return this row's logits
  int32_t size() const { return (int32_t)tokens.size(); }
  void add(int32_t token, int32_t p, int32_t s, bool want) {
    tokens.push_back(token); pos.push_back(p); seq.push_back(s); logits.push_back(want ? 1 : 0);
  }
  void clear() { tokens.clear(); pos.clear(); seq.clear(); logits.clear(); }
};

class Forward {
 public:
  Forward(const ModelConfig& cfg, const ModelWeights& w, Backend& be, int32_t max_tokens);
  ~Forward();
  Forward(const Forward&) = delete;
  Forward& operator=(const Forward&) = delete;

  int32_t max_tokens() const { return max_tok_; }
  // Runs the batch through the model; the cache must have pages reserved for every token.
  // Writes (rows with logits = 1, n_vocab) floats to `logits_out` (host memory), in batch order.
  // Steps of up to kMaxGraphTokens tokens (decode) are recorded once per shape and replayed
  // (Backend::begin_capture) where the backend records; the result is the same bit for bit.
  void run(const Batch& b, KVCache& cache, float* logits_out);
  static constexpr int32_t kMaxGraphTokens = 8;
  // Test/bench hooks: steps replayed from a recorded graph, and graphs recorded, so far.
  int64_t graph_replays() const { return n_replays_; }
  int64_t graph_captures() const { return n_captures_; }

 private:
  // What a recorded step bakes in besides the fixed activation buffers: the batch shape (tokens
  // per sequence, which rows want logits), each layer's cache view (arena, format state such as
  // GAAC calibration) and the backend's scratch generation. Per-step values (token ids,
  // positions, block-table addresses) are in the metadata buffer, uploaded before each step.
  struct StepKey {
    std::vector<int32_t> shape;      // n, n_seqs, n_q of each sequence, logits mask
    std::vector<KVLayerView> views;  // per layer
    uint64_t epoch = 0;
    bool operator==(const StepKey& o) const;
  };
  struct Recorded {
    StepKey key;
    std::unique_ptr<StepGraph> graph;
  };
  // The ops of a step whose metadata is uploaded (no host<->device traffic, no synchronization);
  // max_q: the most tokens of one of its sequences; max_len: its longest sequence's length, or 0
  // (AttentionArgs).
  void enqueue(const Batch& b, KVCache& cache, int32_t n_seqs, const int32_t* ids, const int32_t* pos,
               const KVTokenSlot* slots, const AttnSeq* seqs, int32_t n_out, int32_t max_q, int32_t max_len);
  StepKey make_key(const Batch& b, KVCache& cache, const std::vector<AttnSeq>& seqs) const;

  float* buf(size_t n);
  const ModelConfig& cfg_;
  const ModelWeights& w_;
  Backend& be_;
  int32_t max_tok_;
  std::vector<void*> allocs_;
  // Activations (max_tok rows each), in backend memory.
  float *x_, *xn_, *q_, *k_, *v_, *attn_, *o_, *gate_, *up_, *logits_;
  // A step's metadata, packed for its n and n_seqs: ids (n), positions (n), slots (n_layer, n),
  // sequences (n_layer, n_seqs). Built in host_meta_ (backend host memory: page-locked on
  // CUDA) and uploaded to meta_ in one copy; a step of the same shape uses the same addresses.
  uint8_t* meta_ = nullptr;
  uint8_t* host_meta_ = nullptr;
  size_t meta_bytes_ = 0;
  bool meta_in_flight_ = false;   // an upload from host_meta_ may not have completed
  std::vector<Recorded> graphs_;  // most recent last; at most kMaxGraphs
  StepKey seen_;                  // the last step run eagerly: recorded when the next one matches
  bool graphs_broken_ = false;    // a recording failed: run eagerly from then on
  int64_t n_replays_ = 0, n_captures_ = 0;
  static constexpr size_t kMaxGraphs = 8;
};

}  // namespace gaacrt
