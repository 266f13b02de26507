// rms_norm.cu — y = x / sqrt(mean(x²) + eps) * w, one thread block per row (kernels/row_norm.cuh:
// the sum of squares in double like the CPU reference, backends/cpu/rms_norm.cpp, so the two
// differ only in the order of a double sum: far below float rounding). y may alias x (each
// element is read in the first pass and written in the second, after a barrier).
#include "cuda_backend.h"
#include "cuda_common.h"
#include "kernels/row_norm.cuh"

namespace gaacrt::cuda {
namespace {

// dim % 4 == 0, 16-byte aligned rows: quads, the first kNormCache per thread kept in registers.
__global__ void __launch_bounds__(kNormMaxThreads)
rms_norm4_kernel(const float* x, const float* __restrict__ w, float eps, int64_t dim, float* y) {
  pdl_begin();
  const int64_t n4 = dim / 4;
  const float4* xr = reinterpret_cast<const float4*>(x + blockIdx.x * dim);
  const float4* w4 = reinterpret_cast<const float4*>(w);
  float4* yr = reinterpret_cast<float4*>(y + blockIdx.x * dim);
  float4 c[kNormCache];
  const float inv = row_inv_rms4(xr, n4, eps, c);
  auto put = [&](int64_t i, float4 v) {
    const float4 g = w4[i];
    yr[i] = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
  };
#pragma unroll
  for (int k = 0; k < kNormCache; ++k) {
    const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
    if (i < n4) put(i, c[k]);
  }
  for (int64_t i = threadIdx.x + (int64_t)kNormCache * blockDim.x; i < n4; i += blockDim.x) put(i, xr[i]);
}

__global__ void __launch_bounds__(kNormMaxThreads)
rms_norm1_kernel(const float* x, const float* __restrict__ w, float eps, int64_t dim, float* y) {
  pdl_begin();
  const float* xr = x + blockIdx.x * dim;
  float* yr = y + blockIdx.x * dim;
  const float inv = row_inv_rms1(xr, dim, eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * inv * w[i];
}

}  // namespace

void CudaBackend::rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y) {
  if (rows <= 0 || dim <= 0) return;
  if (rows > 0x7fffffff) throw Error("backend", "invalid_argument", strfmt("cuda rms_norm: %lld rows", (long long)rows));
  const bool quads = norm_quads(dim) && aligned16(x) && aligned16(w) && aligned16(y);
  launch_kernel(quads ? rms_norm4_kernel : rms_norm1_kernel, (unsigned)rows, norm_threads(dim), 0, stream_, x, w, eps,
                dim, y);
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gaacrt::cuda
