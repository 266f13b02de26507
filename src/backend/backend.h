// backend.h — the op interface every backend implements (CPU is the reference).
//
// One op = one declaration here + one file per backend with the same stem
// (backends/cpu/matmul.cpp, backends/cuda/matmul.cu, backends/metal/kernels/matmul.metal).
// Ops take device pointers, sizes and strides; the backend checks what it is given, its kernels
// do not. Every pointer comment gives the shape in row-major (slowest first) order.
// The forward pass (src/model) is written once against this interface.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "devices.h"
#include "quant/types.h"

namespace gaacrt {

// A weight matrix in backend memory: n_rows rows (output features) of n_cols elements of `type`,
// each row `row_stride` bytes after the previous (ggml: ne[0] = n_cols, ne[1] = n_rows).
struct WeightView {
  GGMLType type = GGMLType::F32;
  int64_t n_rows = 0, n_cols = 0;
  size_t row_stride = 0;
  const void* data = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& device() const = 0;

  // ---- memory ----
  virtual void* alloc(size_t bytes) = 0;  // 256-byte aligned; throws Error("backend","out_of_memory")
  virtual void free(void* p) = 0;
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;    // host -> device
  virtual void download(void* dst, const void* src, size_t bytes) = 0;  // device -> host
  virtual void synchronize() = 0;
  // True when host pointers (a mapped GGUF) can be used directly as weights (CPU, Apple unified memory).
  virtual bool shares_host_memory() const = 0;

  // ---- ops ----
  // dst(n_rows, w.n_cols) = dequantize(w): bit-identical to the gguf package on every backend.
  virtual void dequantize(const WeightView& w, float* dst) = 0;
  // y(n_tok, w.n_rows) = x(n_tok, w.n_cols) · wᵀ. Activations are quantized to 8 bits per the
  // weight type (llama.cpp's vec_dot_type) on the CPU; within 1e-2 relative L2 of exact math.
  virtual void matmul(const WeightView& w, const float* x, int64_t n_tok, float* y) = 0;
};

}  // namespace gaacrt
