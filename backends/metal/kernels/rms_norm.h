// rms_norm.h — y = x / sqrt(mean(x²) + eps) * w, one threadgroup per row (backends/cpu/rms_norm.cpp
// is the reference; it sums in double, this in float: well inside the op's tolerance).
#pragma once
#include "common.h"
#include "metal/kernels/args.h"

namespace gaacrt {
namespace mtl {

// y(rows, dim) may alias x: every thread reads its elements for the sum before the barrier and
// writes only elements it read itself afterwards.
// partial: one float per SIMD group.
template <typename T>
kernel void rms_norm(constant RmsNormArgs& a [[buffer(0)]], device const T* x [[buffer(1)]],
                     device const T* w [[buffer(2)]], device T* y [[buffer(3)]],
                     threadgroup float* partial GAACRT_TG_MEM(0), GAACRT_POSITIONS) {
  const uint64_t row = (uint64_t)tgpig.x * a.dim;
  float ss = 0.0f;
  for (uint i = tiitg; i < a.dim; i += NORM_THREADS) ss += x[row + i] * x[row + i];
  ss = simd_sum(ss);
  if (tiisg == 0) partial[sgitg] = ss;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float total = 0.0f;  // every thread adds the partials in the same order: one value for all
  for (uint k = 0; k < NORM_THREADS / SIMD_WIDTH; ++k) total += partial[k];
  const float inv = 1.0f / precise::sqrt(total / (float)a.dim + a.eps);
  for (uint i = tiitg; i < a.dim; i += NORM_THREADS) y[row + i] = x[row + i] * inv * w[i];
}

}  // namespace mtl
}  // namespace gaacrt
