// forward.h — the one forward pass, written against the backend op interface.
//
// A Batch holds tokens of one or more sequences; a sequence's tokens are contiguous and in
// position order. The pass appends their K/V to the cache (the caller reserved the pages) and
// returns logits for the rows that asked for them. Decode is a batch of one token per sequence;
// prefill is a chunk of one sequence's prompt.
#pragma once
#include <cstdint>
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
  void run(const Batch& b, KVCache& cache, float* logits_out);

 private:
  float* buf(size_t n);
  const ModelConfig& cfg_;
  const ModelWeights& w_;
  Backend& be_;
  int32_t max_tok_;
  std::vector<void*> allocs_;
  // Activations (max_tok rows each), in backend memory.
  float *x_, *xn_, *q_, *k_, *v_, *attn_, *o_, *gate_, *up_, *logits_;
  int32_t *ids_, *pos_;
  KVTokenSlot* slots_;   // backend memory: (n_layer, n) slots then (n_layer, n_seqs) sequences of a step
  size_t meta_bytes_ = 0;
  std::vector<uint8_t> host_meta_;  // the step's metadata, built here and uploaded once
};

}  // namespace gaacrt
