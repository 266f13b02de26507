// cuda_backend.cu — CudaBackend memory management (the ops live in one file each).
#include "cuda_backend.h"
#include "cuda_common.h"

namespace gaacrt::cuda {

CudaBackend::CudaBackend(int device) : device_(device) {
  int n = 0;
  GAACRT_CUDA_CHECK(cudaGetDeviceCount(&n));
  if (device < 0 || device >= n)
    throw Error("backend", "unavailable", strfmt("cuda: device %d does not exist (%d devices)", device, n));
  GAACRT_CUDA_CHECK(cudaSetDevice(device));
  GAACRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  cudaDeviceProp p;
  GAACRT_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  info_.backend = "cuda";
  info_.index = device;
  info_.name = p.name;
  info_.total_memory = p.totalGlobalMem;
  info_.cc_major = p.major;
  info_.cc_minor = p.minor;
  info_.multiprocessors = p.multiProcessorCount;
}

CudaBackend::~CudaBackend() {
  if (stream_) cudaStreamDestroy(stream_);
}

void* CudaBackend::alloc(size_t bytes) {
  void* p = nullptr;
  GAACRT_CUDA_CHECK(cudaSetDevice(device_));
  GAACRT_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 256 : bytes));
  return p;
}
void CudaBackend::free(void* p) {
  if (p) cudaFree(p);
}
void CudaBackend::upload(void* dst, const void* src, size_t bytes) {
  GAACRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
}
void CudaBackend::download(void* dst, const void* src, size_t bytes) {
  GAACRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  GAACRT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}
void CudaBackend::synchronize() { GAACRT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

}  // namespace gaacrt::cuda
