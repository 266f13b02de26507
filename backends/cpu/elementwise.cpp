// elementwise.cpp — add, act_mul (SiLU / GELU-tanh gating), softcap.
#include <cmath>

#include "ops.h"

namespace gaacrt::cpu {

void add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void act_mul(const float* g, const float* u, int64_t n, Activation act, float* h, ThreadPool& pool) {
  auto body = [&](int64_t i0, int64_t i1) {
    if (act == Activation::SiLU) {
      for (int64_t i = i0; i < i1; ++i) h[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
    } else {
      // ggml's gelu: the tanh approximation 0.5x(1 + tanh(sqrt(2/pi) x (1 + 0.044715 x²))).
      constexpr float kSqrt2OverPi = 0.79788456080286535588f;
      for (int64_t i = i0; i < i1; ++i) {
        const float x = g[i];
        h[i] = 0.5f * x * (1.f + std::tanh(kSqrt2OverPi * x * (1.f + 0.044715f * x * x))) * u[i];
      }
    }
  };
  if (n < 16384) body(0, n);
  else pool.parallel_for(n, body);
}

void softcap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace gaacrt::cpu
