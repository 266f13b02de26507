// sampler.h — the sampler chain, with llama.cpp's order and defaults (spec/gguf.md §6.1):
//   penalties -> top_k -> top_p -> min_p -> temperature -> draw
// temperature <= 0 is greedy (argmax). Same seed -> same tokens.
#pragma once
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

namespace gaacrt {

constexpr uint32_t kRandomSeed = 0xFFFFFFFFu;

struct SamplerParams {
  float temperature = 0.8f;
  int32_t top_k = 40;            // <= 0: all tokens
  float top_p = 0.95f;           // 1: off
  float min_p = 0.05f;           // 0: off
  float repeat_penalty = 1.0f;   // 1: off
  int32_t repeat_last_n = 64;    // window for all three penalties; 0: off, -1: whole history
  float frequency_penalty = 0.f;
  float presence_penalty = 0.f;
  uint32_t seed = kRandomSeed;   // kRandomSeed: from std::random_device
  int32_t min_keep = 1;          // top_k/top_p/min_p never keep fewer than this
};

class Sampler {
 public:
  Sampler(const SamplerParams& p, int32_t n_vocab);
  // Picks the next token from logits (n_vocab). Does not record it: call accept().
  int32_t sample(const float* logits);
  // Records a token in the penalty history (prompt tokens too, as llama.cpp does).
  void accept(int32_t token);
  void reset();                  // clears the history and reseeds
  const SamplerParams& params() const { return p_; }
  uint32_t seed() const { return seed_; }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  struct Cand { int32_t id; float logit; };
  void apply_penalties(std::vector<Cand>& c) const;
  SamplerParams p_;
  int32_t n_vocab_;
  uint32_t seed_;
  std::mt19937 rng_;
  std::deque<int32_t> history_;
  std::vector<Cand> cand_;
};

}  // namespace gaacrt
