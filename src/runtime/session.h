// session.h — one conversation: a sequence in a Context, its token history and last logits.
// Used by one thread at a time; cancel() may be called from any thread.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "context.h"

namespace gaacrt {

class Session {
 public:
  explicit Session(std::shared_ptr<Context> ctx);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Appends tokens (prefill in chunks); afterwards logits() are those of the last token.
  // Throws context_full (nothing evaluated) or aborted (a prefix evaluated, history says which).
  // With all_logits, every token's logits (n, n_vocab) are written to all_out as well.
  void eval(const int32_t* tokens, int32_t n, float* all_out = nullptr);
  const std::vector<float>& logits() const { return logits_; }
  int32_t n_past() const { return (int32_t)history_.size(); }
  const std::vector<int32_t>& history() const { return history_; }
  // Keeps the first n tokens. When the cache can no longer represent them (a released
  // sliding-window block, a lossy compressed block), re-prefills them from the history.
  void truncate(int32_t n);
  void reset() { truncate(0); }
  void cancel() { cancel_.store(true); }
  void clear_cancel() { cancel_.store(false); }
  bool cancelled() const { return cancel_.load(); }
  // Polled with the cancel flag between prefill chunks and generated tokens (C API abort callback).
  void set_abort_callback(std::function<bool()> fn) { abort_cb_ = std::move(fn); }
  bool should_stop() const { return cancel_.load() || (abort_cb_ && abort_cb_()); }

  Context& context() { return *ctx_; }
  const std::shared_ptr<Context>& context_ptr() const { return ctx_; }
  int seq() const { return seq_; }

  // One decode step for several sessions of the same context: token i appended to sessions[i].
  static void decode_batch(const std::vector<Session*>& sessions, const std::vector<int32_t>& tokens);

 private:
  std::shared_ptr<Context> ctx_;
  int seq_;
  std::vector<int32_t> history_;
  std::vector<float> logits_;
  std::atomic<bool> cancel_{false};
  std::function<bool()> abort_cb_;
};

}  // namespace gaacrt
