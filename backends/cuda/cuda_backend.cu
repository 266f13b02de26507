// cuda_backend.cu — CudaBackend memory management, scratch and the deferred kernel-error check
// (the ops live in one file each).
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
  void* h = nullptr;
  GAACRT_CUDA_CHECK(cudaHostAlloc(&h, sizeof(DeviceErrors), cudaHostAllocMapped));
  errors_ = static_cast<DeviceErrors*>(h);
  *errors_ = DeviceErrors{0, 0, 0, 0};
  void* d = nullptr;
  GAACRT_CUDA_CHECK(cudaHostGetDevicePointer(&d, h, 0));
  dev_errors_ = static_cast<DeviceErrors*>(d);
}

CudaBackend::~CudaBackend() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (scratch_) cudaFree(scratch_);
  if (attn_counters_) cudaFree(attn_counters_);
  if (errors_) cudaFreeHost(errors_);
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
  raise_device_errors();
}
void CudaBackend::synchronize() {
  GAACRT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  raise_device_errors();
}

void CudaBackend::raise_device_errors() {
  if (errors_->code == 0) return;
  const DeviceErrors e = *errors_;
  *errors_ = DeviceErrors{0, 0, 0, 0};
  throw Error("kv", "corrupt_tile", strfmt("layer %d kv-head %d block %d: a compressed tile failed validation on "
                                           "the GPU (reserved tag or escape overrun); its rows were not read",
                                           e.layer, e.head, e.block));
}

void* CudaBackend::scratch(size_t bytes) {
  if (bytes > scratch_bytes_) {
    // The stream may still use the old buffer: wait before freeing it.
    GAACRT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (scratch_) cudaFree(scratch_);
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    GAACRT_CUDA_CHECK(cudaMalloc(&scratch_, bytes));
    scratch_bytes_ = bytes;
  }
  return scratch_;
}

}  // namespace gaacrt::cuda
