// activation.cuh — the FFN's gating, act(g) · u, as one device function for every kernel that
// applies it (elementwise.cu's act_mul, the decode gate/up matvec, the prefill matmul's gate/up
// epilogue): backends/cpu/elementwise.cpp's formulas with accurate expf / tanhf (the build has no
// fast math), so wherever the gating runs it gives the same bits.
#pragma once

namespace gaacrt::cuda {

// kAct: Activation::SiLU (0) or Activation::GeluTanh (1).
template <int kAct>
__device__ __forceinline__ float act_gate(float g, float u) {
  if constexpr (kAct == 0) {
    return g / (1.f + expf(-g)) * u;
  } else {
    constexpr float kSqrt2OverPi = 0.79788456080286535588f;  // ggml's tanh-approximated GELU
    return 0.5f * g * (1.f + tanhf(kSqrt2OverPi * g * (1.f + 0.044715f * g * g))) * u;
  }
}

}  // namespace gaacrt::cuda
