// rope.cu — rotary position embedding on the GPU, NORM (adjacent pairs) and NEOX (half split),
// with freq_factors, linear scaling and YaRN (spec/gguf.md §3.1). Same arithmetic as the CPU
// reference (backends/cpu/rope.cpp): inverse frequency, angle, cos and sin in double, the
// rotation in float; positions are read from device memory (nothing host-side per token).
#include <algorithm>
#include <cmath>

#include "cuda_backend.h"
#include "cuda_common.h"

namespace gaacrt::cuda {
namespace {

constexpr int kThreads = 128;

struct RopeConst {
  int32_t n_rot, half, style;
  double base;
  double freq_scale;
  float ext_factor, mscale;  // mscale: attn_factor, times the YaRN magnitude correction when on
  float corr0, corr1;        // YaRN ramp ends (dims), from yarn_corr_dims on the host
};

// One thread per (token, pair i): its cos/sin rotate pair i of every head of the token.
__global__ void rope_kernel(float* x, int64_t n_tok, int32_t n_heads, int32_t head_dim, const int32_t* __restrict__ pos,
                            const float* __restrict__ freq_factors, RopeConst c) {
  const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= n_tok * c.half) return;
  const int64_t t = idx / c.half;
  const int i = (int)(idx % c.half);
  double inv_freq = pow(c.base, -2.0 * i / c.n_rot);
  if (freq_factors) inv_freq /= freq_factors[i];
  const double extrap = (double)pos[t] * inv_freq;
  double theta = c.freq_scale * extrap;
  if (c.ext_factor != 0.f) {
    const float y = ((2 * i) / 2 - c.corr0) / fmaxf(0.001f, c.corr1 - c.corr0);
    const float ramp = 1.f - fminf(1.f, fmaxf(0.f, y));
    const float mix = ramp * c.ext_factor;
    theta = theta * (1 - mix) + extrap * mix;
  }
  const float cs = (float)cos(theta) * c.mscale, sn = (float)sin(theta) * c.mscale;
  const int a = c.style == 0 ? 2 * i : i;
  const int b = c.style == 0 ? 2 * i + 1 : i + c.half;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + (t * n_heads + h) * head_dim;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * cs - x1 * sn;
    v[b] = x0 * sn + x1 * cs;
  }
}

}  // namespace

void CudaBackend::rope(float* x, int64_t n_tok, int32_t n_heads, int32_t head_dim, const int32_t* pos,
                       const RopeParams& p) {
  if (n_tok <= 0 || n_heads <= 0) return;
  if (p.n_rot <= 0 || p.n_rot % 2 || p.n_rot > head_dim)
    throw Error("backend", "invalid_argument",
                strfmt("cuda rope: n_rot %d must be even and in (0, head_dim %d]", p.n_rot, head_dim));
  RopeConst c;
  c.n_rot = p.n_rot;
  c.half = p.n_rot / 2;
  c.style = p.style == RopeStyle::Norm ? 0 : 2;
  c.base = p.base;
  c.freq_scale = p.freq_scale;
  c.ext_factor = p.ext_factor;
  c.mscale = p.attn_factor;
  c.corr0 = c.corr1 = 0.f;
  if (p.ext_factor != 0.f) {
    // YaRN correction dims and magnitude, computed as the CPU reference does (float math).
    auto corr = [&](float n) {
      return p.n_rot * std::log((float)p.n_ctx_orig / (n * 2.f * (float)M_PI)) / (2.f * std::log(p.base));
    };
    c.corr0 = std::max(0.f, std::floor(corr(p.beta_fast)));
    c.corr1 = std::min((float)p.n_rot - 1, std::ceil(corr(p.beta_slow)));
    c.mscale *= 1.f + 0.1f * std::log(1.f / p.freq_scale);
  }
  const int64_t n = n_tok * c.half;
  rope_kernel<<<(unsigned)((n + kThreads - 1) / kThreads), kThreads, 0, stream_>>>(x, n_tok, n_heads, head_dim, pos,
                                                                                  p.freq_factors, c);
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gaacrt::cuda
