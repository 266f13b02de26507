// cuda_backend.h — the CUDA backend: device memory, one stream, the op launchers.
#pragma once
#include <cuda_runtime.h>

#include "backend/backend.h"
#include "common/error.h"

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
  void matmul(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias) override;
  // The remaining ops arrive with issue 7; until then they raise a clear "not implemented" error.
  void get_rows(const WeightView&, const int32_t*, int64_t, float, float*) override { missing("get_rows"); }
  void rms_norm(const float*, const float*, float, int64_t, int64_t, float*) override { missing("rms_norm"); }
  void rope(float*, int64_t, int32_t, int32_t, const int32_t*, const RopeParams&) override { missing("rope"); }
  void add(float*, const float*, int64_t) override { missing("add"); }
  void act_mul(const float*, const float*, int64_t, Activation, float*) override { missing("act_mul"); }
  void softcap(float*, int64_t, float) override { missing("softcap"); }
  void kv_store(const KVLayerView&, const KVTokenSlot*, int64_t, const float*, const float*) override { missing("kv_store"); }
  void kv_finalize(const KVLayerView&, KVFinalizeJob*, int64_t) override { missing("kv_finalize"); }
  void attention(const KVLayerView&, const AttentionArgs&, const AttnSeq*, int32_t, const float*, float*) override {
    missing("attention");
  }

  cudaStream_t stream() const { return stream_; }

 private:
  [[noreturn]] static void missing(const char* op) {
    throw Error("backend", "not_implemented", strfmt("cuda: op '%s' is not implemented yet", op));
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  DeviceInfo info_;
};

}  // namespace gaacrt::cuda
