// cuda_backend.h — the CUDA backend: device memory, one stream, the op launchers.
#pragma once
#include <cuda_runtime.h>

#include "backend/backend.h"

namespace gaacrt::cuda {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  const DeviceInfo& device() const override { return info_; }

  void* alloc(size_t bytes) override;
  void free(void* p) override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;
  void synchronize() override;
  bool shares_host_memory() const override { return false; }

  void dequantize(const WeightView& w, float* dst) override;
  void matmul(const WeightView& w, const float* x, int64_t n_tok, float* y) override;

  cudaStream_t stream() const { return stream_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  DeviceInfo info_;
};

}  // namespace gaacrt::cuda
