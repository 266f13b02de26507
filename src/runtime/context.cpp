// context.cpp — chunked prefill and batched decode over a shared cache.
#include "context.h"

#include <algorithm>

#include "common/error.h"

namespace gaacrt {

namespace {
KVCacheParams cache_params(const Model& m, const ContextParams& p) {
  KVCacheParams k;
  k.format = parse_kv_format(p.cache);
  k.n_ctx = p.n_ctx > 0 ? p.n_ctx : m.config().n_ctx_train;
  k.n_seq_max = p.n_seq_max;
  k.budget_bytes = p.budget_bytes;
  k.n_ubatch = p.n_ubatch;
  k.calibration = p.calibration;
  k.keep_raw = p.keep_raw;
  k.e8_scoring = p.e8_scoring;
  k.e8_center = p.e8_center;
  k.raw_sink = p.raw_sink;
  k.raw_window = p.raw_window;
  k.model_path = m.path();
  return k;
}
}  // namespace

Context::Context(const Model& m, const ContextParams& p) : model_(m), params_(p) {
  if (p.n_ubatch <= 0) throw Error("runtime", "invalid_argument", "n_ubatch must be positive");
  cache_ = std::make_unique<KVCache>(m.config(), m.backend(), cache_params(m, p));
  params_.n_ctx = cache_->n_ctx();
  fwd_ = std::make_unique<Forward>(m.config(), m.weights(), m.backend(), std::max(p.n_ubatch, p.n_seq_max));
}

void Context::prefill(int seq, const int32_t* tokens, int32_t n, float* logits, const std::function<bool()>& abort,
                      bool all_logits) {
  if (n <= 0) return;
  // The whole prompt must fit: checked before any chunk runs, so nothing is half-evaluated.
  if ((int64_t)cache_->length(seq) + n > cache_->n_ctx())
    throw Error("runtime", "context_full", strfmt("prompt of %d tokens after %d cached ones would pass the context length %d",
                                                  n, cache_->length(seq), cache_->n_ctx()));
  for (int32_t done = 0; done < n;) {
    if (abort && abort()) throw Error("runtime", "aborted", strfmt("evaluation cancelled after %d of %d tokens", done, n));
    const int32_t m = std::min(params_.n_ubatch, n - done);
    const int32_t pos0 = cache_->length(seq);
    cache_->reserve(seq, m);
    batch_.clear();
    for (int32_t i = 0; i < m; ++i) batch_.add(tokens[done + i], pos0 + i, seq, all_logits || done + i == n - 1);
    fwd_->run(batch_, *cache_, all_logits ? logits + (size_t)done * n_vocab() : logits);
    cache_->commit(seq, m);
    done += m;
  }
}

void Context::decode(const std::vector<int>& seqs, const std::vector<int32_t>& tokens, float* logits) {
  if (seqs.size() != tokens.size()) throw Error("runtime", "invalid_argument", "decode: seqs and tokens differ in length");
  std::vector<std::pair<int, int32_t>> need;
  for (int s : seqs) need.emplace_back(s, 1);
  cache_->reserve_batch(need);
  batch_.clear();
  for (size_t i = 0; i < seqs.size(); ++i) batch_.add(tokens[i], cache_->length(seqs[i]), seqs[i], true);
  fwd_->run(batch_, *cache_, logits);
  for (int s : seqs) cache_->commit(s, 1);
}

}  // namespace gaacrt
