// elementwise.cpp — add, act_mul (SiLU / GELU-tanh gating), softcap. act_mul runs the AVX2 gates
// of elementwise_avx2.cpp where the CPU has AVX2, the plain loops below elsewhere.
#include <cmath>

#include "cpu_features.h"
#include "ops.h"

namespace gaacrt::cpu {

#if !(defined(__x86_64__) || defined(_M_X64) || defined(__i386__))
ActMulFn act_mul_avx2(Activation) { return nullptr; }  // elementwise_avx2.cpp is built on x86 only
#endif

void add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void act_mul(const float* g, const float* u, int64_t n, Activation act, float* h, ThreadPool& pool) {
  const ActMulFn simd = cpu_has_avx2() ? act_mul_avx2(act) : nullptr;
  auto body = [&](int64_t i0, int64_t i1) {
    if (simd) {
      simd(g + i0, u + i0, i1 - i0, h + i0);
    } else if (act == Activation::SiLU) {
      for (int64_t i = i0; i < i1; ++i) h[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
    } else {
      // ggml's gelu, the tanh approximation 0.5x(1 + tanh z), z = sqrt(2/pi) x (1 + 0.044715 x²),
      // written as x / (1 + e^-2z) (1 + tanh z = 2/(1 + e^-2z)): the same function without the
      // cancellation of 1 + tanh z ≈ 0 for negative x, which cost float digits there.
      constexpr float kSqrt2OverPi = 0.79788456080286535588f;
      for (int64_t i = i0; i < i1; ++i) {
        const float x = g[i];
        h[i] = x / (1.f + std::exp(-2.f * kSqrt2OverPi * x * (1.f + 0.044715f * x * x))) * u[i];
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
