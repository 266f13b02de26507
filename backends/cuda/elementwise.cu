// elementwise.cu — add, act_mul (SiLU / GELU-tanh gating) and softcap on the GPU, the same
// formulas as backends/cpu/elementwise.cpp (accurate expf/tanhf; the build has no fast math).
#include "cuda_backend.h"
#include "cuda_common.h"
#include "kernels/activation.cuh"

namespace gaacrt::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void add_kernel(float* __restrict__ y, const float* __restrict__ x, int64_t n) {
  pdl_begin();
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] += x[i];
}

// h may alias g: each element is read before it is written, by the same thread.
template <int kAct>
__global__ void act_mul_kernel(const float* g, const float* __restrict__ u, int64_t n, float* h) {
  pdl_begin();
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    h[i] = act_gate<kAct>(g[i], u[i]);
}

__global__ void softcap_kernel(float* __restrict__ x, int64_t n, float cap) {
  pdl_begin();
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    x[i] = cap * tanhf(x[i] / cap);
}

}  // namespace

void CudaBackend::add(float* y, const float* x, int64_t n) {
  if (n <= 0) return;
  launch_kernel(add_kernel, grid_for_items(n, kThreads), kThreads, 0, stream_, y, x, n);
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

void CudaBackend::act_mul(const float* g, const float* u, int64_t n, Activation act, float* h) {
  if (n <= 0) return;
  auto run = [&](auto kernel) { launch_kernel(kernel, grid_for_items(n, kThreads), kThreads, 0, stream_, g, u, n, h); };
  if (act == Activation::SiLU) run(act_mul_kernel<0>);
  else if (act == Activation::GeluTanh) run(act_mul_kernel<1>);
  else throw Error("backend", "invalid_argument", strfmt("cuda act_mul: unknown activation %d", (int)act));
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

void CudaBackend::softcap(float* x, int64_t n, float cap) {
  if (n <= 0) return;
  if (!(cap > 0.f)) throw Error("backend", "invalid_argument", strfmt("cuda softcap: cap must be > 0, got %g", cap));
  launch_kernel(softcap_kernel, grid_for_items(n, kThreads), kThreads, 0, stream_, x, n, cap);
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gaacrt::cuda
