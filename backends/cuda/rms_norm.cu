// rms_norm.cu — y = x / sqrt(mean(x²) + eps) * w, one thread block per row. The sum of squares
// is taken in double like the CPU reference (backends/cpu/rms_norm.cpp), so the two differ only
// in the order of a double sum: far below float rounding. y may alias x (each element is read
// in the first pass and written in the second, after a barrier).
#include "cuda_backend.h"
#include "cuda_common.h"

namespace gaacrt::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void rms_norm_kernel(const float* x, const float* __restrict__ w, float eps, int64_t dim, float* y) {
  pdl_begin();
  const float* xr = x + blockIdx.x * dim;
  float* yr = y + blockIdx.x * dim;
  const float inv = row_inv_rms<kThreads>(xr, dim, eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * inv * w[i];
}

}  // namespace

void CudaBackend::rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y) {
  if (rows <= 0 || dim <= 0) return;
  if (rows > 0x7fffffff) throw Error("backend", "invalid_argument", strfmt("cuda rms_norm: %lld rows", (long long)rows));
  launch_kernel(rms_norm_kernel, (unsigned)rows, kThreads, 0, stream_, x, w, eps, dim, y);
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gaacrt::cuda
