// cpu_backend.h — the reference backend: host memory, a thread pool, SIMD kernels.
#pragma once
#include "backend/backend.h"
#include "thread_pool.h"

namespace gaacrt::cpu {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int n_threads);
  const DeviceInfo& device() const override { return info_; }

  void* alloc(size_t bytes) override;
  void free(void* p) override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;
  void synchronize() override {}
  bool shares_host_memory() const override { return true; }

  void dequantize(const WeightView& w, float* dst) override;
  void matmul(const WeightView& w, const float* x, int64_t n_tok, float* y) override;

  ThreadPool& pool() { return pool_; }

 private:
  ThreadPool pool_;
  DeviceInfo info_;
};

}  // namespace gaacrt::cpu
