// elementwise.h — add, act_mul (SiLU / GELU-tanh gating) and softcap: one thread per element.
// Same formulas as backends/cpu/elementwise.cpp.
#pragma once
#include "common.h"
#include "metal/kernels/args.h"

namespace gaacrt {
namespace mtl {

// y(n) += x(n)   (kernels are templates, instantiated once in elementwise.metal: a plain function
// defined in a header would be defined again by every .metal file that includes it)
template <typename T>
kernel void add(constant ElementwiseArgs& a [[buffer(0)]], device T* y [[buffer(1)]],
                device const T* x [[buffer(2)]], GAACRT_POSITIONS) {
  const uint i = tgpig.x * ELEMWISE_THREADS + tiitg;
  if (i < a.n) y[i] = y[i] + x[i];
}

struct SiluAct {
  static float apply(float x) { return x / (1.0f + exp(-x)); }
};
// ggml's gelu: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))
struct GeluTanhAct {
  static float apply(float x) {
    const float k = 0.79788456080286535588f;
    return 0.5f * x * (1.0f + tanh(k * x * (1.0f + 0.044715f * x * x)));
  }
};

// h(n) = act(g(n)) * u(n); h may alias g (each element is read before it is written, by one thread).
template <typename Act>
kernel void act_mul(constant ElementwiseArgs& a [[buffer(0)]], device const float* g [[buffer(1)]],
                    device const float* u [[buffer(2)]], device float* h [[buffer(3)]], GAACRT_POSITIONS) {
  const uint i = tgpig.x * ELEMWISE_THREADS + tiitg;
  if (i < a.n) h[i] = Act::apply(g[i]) * u[i];
}

// x(n) = cap * tanh(x / cap)
template <typename T>
kernel void softcap(constant ElementwiseArgs& a [[buffer(0)]], device T* x [[buffer(1)]], GAACRT_POSITIONS) {
  const uint i = tgpig.x * ELEMWISE_THREADS + tiitg;
  if (i < a.n) x[i] = a.cap * tanh(x[i] / a.cap);
}

}  // namespace mtl
}  // namespace gaacrt
