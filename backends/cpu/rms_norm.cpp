// rms_norm.cpp — y = x / sqrt(mean(x²) + eps) * w, the sum of squares in double (a reference
// should not lose digits to a 1536-term fp32 sum; ggml sums in float — both are well within tolerance).
#include <cmath>

#include "ops.h"

namespace gaacrt::cpu {

void rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y, ThreadPool& pool) {
  auto body = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * dim;
      float* yr = y + r * dim;
      double ss = 0.0;
      for (int64_t i = 0; i < dim; ++i) ss += (double)xr[i] * xr[i];
      const float inv = (float)(1.0 / std::sqrt(ss / (double)dim + (double)eps));
      for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv * w[i];
    }
  };
  if (rows * dim < 32768) body(0, rows);  // too small to be worth waking the pool
  else pool.parallel_for(rows, body);
}

}  // namespace gaacrt::cpu
