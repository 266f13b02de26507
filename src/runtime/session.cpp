// session.cpp — eval / truncate / batched decode on top of Context.
#include "session.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace gaacrt {

Session::Session(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {
  seq_ = ctx_->cache().new_sequence();
  logits_.assign(ctx_->n_vocab(), 0.f);
}

Session::~Session() { ctx_->cache().free_sequence(seq_); }

void Session::eval(const int32_t* tokens, int32_t n, float* all_out) {
  if (n <= 0) return;
  const int32_t before = ctx_->cache().length(seq_);
  try {
    if (all_out) {
      ctx_->prefill(seq_, tokens, n, all_out, [this] { return should_stop(); }, true);
      std::memcpy(logits_.data(), all_out + (size_t)(n - 1) * ctx_->n_vocab(), logits_.size() * sizeof(float));
    } else {
      ctx_->prefill(seq_, tokens, n, logits_.data(), [this] { return should_stop(); });
    }
  } catch (const Error& e) {
    // Keep the history equal to what the cache holds (an aborted prefill keeps its prefix).
    const int32_t done = ctx_->cache().length(seq_) - before;
    history_.insert(history_.end(), tokens, tokens + std::max(0, done));
    throw;
  }
  history_.insert(history_.end(), tokens, tokens + n);
}

void Session::truncate(int32_t n) {
  if (n < 0 || n > n_past())
    throw Error("runtime", "invalid_argument", strfmt("truncate(%d): the session holds %d tokens", n, n_past()));
  // The cache keeps what it can hold exactly as a fresh run would; the rest is re-evaluated
  // from the history (a released sliding-window block, a finalized partial block, ...).
  const int32_t kept = ctx_->cache().truncate(seq_, n);
  std::vector<int32_t> redo(history_.begin() + kept, history_.begin() + n);
  history_.resize(kept);
  if (!redo.empty()) eval(redo.data(), (int32_t)redo.size());
  // Otherwise the logits of the new last token are not stored; continue by eval()ing a token.
}

void Session::decode_batch(const std::vector<Session*>& sessions, const std::vector<int32_t>& tokens) {
  if (sessions.empty()) return;
  if (sessions.size() != tokens.size())
    throw Error("runtime", "invalid_argument", "decode_batch: one token per session is needed");
  Context& ctx = sessions[0]->context();
  std::vector<int> seqs;
  for (Session* s : sessions) {
    if (&s->context() != &ctx)
      throw Error("runtime", "invalid_argument", "decode_batch: sessions must share one context (make them from one batch)");
    seqs.push_back(s->seq());
  }
  const int32_t V = ctx.n_vocab();
  std::vector<float> logits((size_t)sessions.size() * V);
  ctx.decode(seqs, tokens, logits.data());
  for (size_t i = 0; i < sessions.size(); ++i) {
    std::memcpy(sessions[i]->logits_.data(), logits.data() + i * V, V * sizeof(float));
    sessions[i]->history_.push_back(tokens[i]);
  }
}

}  // namespace gaacrt
