// sampler.cpp — llama.cpp's sampler semantics (src/llama-sampler.cpp in upstream):
//  - repeat penalty: a positive logit is divided by it, a negative one multiplied; then
//    logit -= count * frequency_penalty + (count > 0) * presence_penalty;
//  - top_p keeps the smallest prefix of the sorted softmax whose mass reaches p;
//  - min_p keeps tokens with p >= min_p * p_max, i.e. logit >= max_logit + ln(min_p);
//  - the draw is one uniform double from a seeded mt19937 against the cumulative probabilities.
#include "sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "common/error.h"

namespace gaacrt {

Sampler::Sampler(const SamplerParams& p, int32_t n_vocab) : p_(p), n_vocab_(n_vocab) {
  if (n_vocab <= 0) throw Error("sampling", "invalid_argument", "n_vocab must be positive");
  if (p.top_p < 0.f || p.top_p > 1.f || p.min_p < 0.f || p.min_p > 1.f)
    throw Error("sampling", "invalid_argument", strfmt("top_p %g and min_p %g must be in [0, 1]", p.top_p, p.min_p));
  if (p.repeat_penalty <= 0.f)
    throw Error("sampling", "invalid_argument", strfmt("repeat_penalty %g must be positive", p.repeat_penalty));
  reset();
}

void Sampler::reset() {
  history_.clear();
  seed_ = p_.seed == kRandomSeed ? std::random_device{}() : p_.seed;
  rng_.seed(seed_);
}

void Sampler::accept(int32_t token) {
  if (p_.repeat_last_n == 0) return;
  history_.push_back(token);
  if (p_.repeat_last_n > 0 && (int32_t)history_.size() > p_.repeat_last_n) history_.pop_front();
}

void Sampler::apply_penalties(std::vector<Cand>& c) const {
  if (history_.empty() || (p_.repeat_penalty == 1.f && p_.frequency_penalty == 0.f && p_.presence_penalty == 0.f))
    return;
  std::unordered_map<int32_t, int32_t> count;
  for (int32_t t : history_) ++count[t];
  for (auto [id, n] : count) {
    if (id < 0 || id >= n_vocab_) continue;
    float& l = c[id].logit;  // candidates are still in id order here
    if (l > 0.f) l /= p_.repeat_penalty;
    else l *= p_.repeat_penalty;
    l -= (float)n * p_.frequency_penalty + (n > 0 ? p_.presence_penalty : 0.f);
  }
}

int32_t Sampler::sample(const float* logits) {
  cand_.resize(n_vocab_);
  for (int32_t i = 0; i < n_vocab_; ++i) cand_[i] = {i, logits[i]};
  apply_penalties(cand_);

  auto by_logit = [](const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
  if (p_.temperature <= 0.f)  // greedy: the first maximum
    return std::min_element(cand_.begin(), cand_.end(), by_logit)->id;

  const size_t keep_min = (size_t)std::max(1, p_.min_keep);
  // top_k (partial sort), leaving candidates sorted by logit.
  size_t n = cand_.size();
  if (p_.top_k > 0 && (size_t)p_.top_k < n) n = std::max((size_t)p_.top_k, keep_min);
  std::partial_sort(cand_.begin(), cand_.begin() + n, cand_.end(), by_logit);
  cand_.resize(n);

  // top_p on the softmax of the remaining candidates.
  if (p_.top_p < 1.f) {
    const float mx = cand_[0].logit;
    double sum = 0;
    for (const Cand& c : cand_) sum += std::exp((double)c.logit - mx);
    double cum = 0;
    size_t last = cand_.size();
    for (size_t i = 0; i < cand_.size(); ++i) {
      cum += std::exp((double)cand_[i].logit - mx) / sum;
      if (cum >= p_.top_p && i + 1 >= keep_min) { last = i + 1; break; }
    }
    cand_.resize(last);
  }
  // min_p relative to the best remaining token.
  if (p_.min_p > 0.f) {
    const float cut = cand_[0].logit + std::log(p_.min_p);
    size_t last = cand_.size();
    for (size_t i = keep_min; i < cand_.size(); ++i)
      if (cand_[i].logit < cut) { last = i; break; }
    cand_.resize(last);
  }
  // temperature, softmax, one draw.
  const float mx = cand_[0].logit;
  std::vector<double> cum(cand_.size());
  double acc = 0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    acc += std::exp(((double)cand_[i].logit - mx) / p_.temperature);
    cum[i] = acc;
  }
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  const double r = uni(rng_) * acc;
  const size_t k = std::upper_bound(cum.begin(), cum.end(), r) - cum.begin();
  return cand_[std::min(k, cand_.size() - 1)].id;
}

}  // namespace gaacrt
