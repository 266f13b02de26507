// rope.cpp — rotary position embedding, NORM (adjacent pairs) and NEOX (half split) styles,
// with freq_factors (Llama 3.1 rope_freqs), linear scaling and YaRN (spec/gguf.md §3.1).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops.h"

namespace gaacrt::cpu {
namespace {

// YaRN: the dims between corr_lo and corr_hi blend interpolated and extrapolated angles.
float yarn_ramp(float lo, float hi, int i0) {
  const float y = (i0 / 2 - lo) / std::max(0.001f, hi - lo);
  return 1.f - std::min(1.f, std::max(0.f, y));
}

void yarn_corr_dims(int n_rot, int n_ctx_orig, float base, float beta_fast, float beta_slow, float dims[2]) {
  auto corr = [&](float n) {
    return n_rot * std::log((float)n_ctx_orig / (n * 2.f * (float)M_PI)) / (2.f * std::log(base));
  };
  dims[0] = std::max(0.f, std::floor(corr(beta_fast)));
  dims[1] = std::min((float)n_rot - 1, std::ceil(corr(beta_slow)));
}

}  // namespace

void rope(float* x, int64_t n_tok, int32_t n_heads, int32_t head_dim, const int32_t* pos, const RopeParams& p,
          ThreadPool& pool) {
  const int half = p.n_rot / 2;
  float corr[2] = {0, 0};
  if (p.ext_factor != 0.f) yarn_corr_dims(p.n_rot, p.n_ctx_orig, p.base, p.beta_fast, p.beta_slow, corr);
  // Inverse frequencies in double: base^(-2i/n_rot) / freq_factor.
  std::vector<double> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    inv_freq[i] = std::pow((double)p.base, -2.0 * i / p.n_rot);
    if (p.freq_factors) inv_freq[i] /= p.freq_factors[i];
  }
  auto body = [&](int64_t t0, int64_t t1) {
    std::vector<float> cs(2 * half);
    for (int64_t t = t0; t < t1; ++t) {
      for (int i = 0; i < half; ++i) {
        const double extrap = (double)pos[t] * inv_freq[i];
        double theta = p.freq_scale * extrap;
        float mscale = p.attn_factor;
        if (p.ext_factor != 0.f) {
          const float mix = yarn_ramp(corr[0], corr[1], 2 * i) * p.ext_factor;
          theta = theta * (1 - mix) + extrap * mix;
          mscale *= 1.f + 0.1f * std::log(1.f / p.freq_scale);
        }
        cs[2 * i] = (float)std::cos(theta) * mscale;
        cs[2 * i + 1] = (float)std::sin(theta) * mscale;
      }
      for (int h = 0; h < n_heads; ++h) {
        float* v = x + (t * n_heads + h) * head_dim;
        for (int i = 0; i < half; ++i) {
          const int a = p.style == RopeStyle::Norm ? 2 * i : i;
          const int b = p.style == RopeStyle::Norm ? 2 * i + 1 : i + half;
          const float x0 = v[a], x1 = v[b], c = cs[2 * i], s = cs[2 * i + 1];
          v[a] = x0 * c - x1 * s;
          v[b] = x0 * s + x1 * c;
        }
      }
    }
  };
  if (n_tok < 4) body(0, n_tok);
  else pool.parallel_for(n_tok, body);
}

}  // namespace gaacrt::cpu
