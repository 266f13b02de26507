// context.h — a KV cache plus the forward pass sized for it: what sessions share to decode
// together. A lone session owns a context of one sequence; a batch shares one among several.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/forward.h"
#include "model/model.h"

namespace gaacrt {

struct ContextParams {
  int32_t n_ctx = 4096;          // per sequence; 0 = the model's training context
  int32_t n_seq_max = 1;
  std::string cache = "bf16";    // KV format name (kv/kv_format.h)
  uint64_t budget_bytes = 0;     // KV arena bytes; 0 = sized for n_seq_max x n_ctx
  int32_t n_ubatch = 512;        // prefill chunk
  std::string calibration;       // GAAC sidecar; "" = "model.gaac" beside the model if present, else online
  bool keep_raw = false;         // test hook (kv_cache.h)
  std::string e8_scoring = "decode";  // E8 scoring path (kv_cache.h)
  E8Center e8_center = E8Center::Off;  // E8 key centering (kv_format.h)
  int32_t raw_sink = 0;               // lossy formats: leading tokens kept BF16 (kv_cache.h)
  int32_t raw_window = -1;            // compressing formats: newest tokens kept raw (-1: the format's default)
};

class Context {
 public:
  Context(const Model& m, const ContextParams& p);

  const Model& model() const { return model_; }
  KVCache& cache() { return *cache_; }
  const Forward& forward() const { return *fwd_; }
  const ContextParams& params() const { return params_; }
  int32_t n_vocab() const { return model_.config().n_vocab; }

  // Appends tokens to one sequence in chunks of n_ubatch. `logits` gets the last token's logits
  // (n_vocab), or every token's (n, n_vocab) when all_logits. `abort` (may be empty) is polled
  // between chunks: when it returns true, the tokens evaluated so far stay in the cache and the
  // call throws Error("runtime", "aborted").
  void prefill(int seq, const int32_t* tokens, int32_t n, float* logits, const std::function<bool()>& abort,
               bool all_logits = false);
  // One batched decode step: token i is appended to sequence seqs[i]; logits (n, n_vocab).
  void decode(const std::vector<int>& seqs, const std::vector<int32_t>& tokens, float* logits);

 private:
  const Model& model_;
  ContextParams params_;
  std::unique_ptr<KVCache> cache_;
  std::unique_ptr<Forward> fwd_;
  Batch batch_;
};

}  // namespace gaacrt
