// dequantize.cu — weight rows to fp32 on the GPU through the portable dequant_block(), so the
// result is bit-identical to the CPU backend and to gguf.quants.dequantize (built --fmad=false).
#include "block_traits.cuh"
#include "common/half.h"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "quant/dequant.h"

namespace gaacrt::cuda {
namespace {

// One thread per block: blocks are independent and small (18–210 bytes).
template <typename Block, int QK>
__global__ void dequantize_blocks_kernel(const uint8_t* __restrict__ src, float* __restrict__ dst,
                                         int64_t n_rows, int64_t blocks_per_row, size_t row_stride) {
  pdl_begin();
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_rows * blocks_per_row) return;
  const int64_t r = i / blocks_per_row, b = i % blocks_per_row;
  float y[QK];
  dequant_block(StoredBlock<Block>::at(src + r * row_stride, b), y);
  float* out = dst + r * blocks_per_row * QK + b * QK;
  for (int j = 0; j < QK; ++j) out[j] = y[j];
}

// Float weight types, one thread per element.
template <int kType>
__global__ void dequantize_float_kernel(const uint8_t* __restrict__ src, float* __restrict__ dst,
                                        int64_t n_rows, int64_t n_cols, size_t row_stride) {
  pdl_begin();
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_rows * n_cols) return;
  const int64_t r = i / n_cols, c = i % n_cols;
  const uint8_t* row = src + r * row_stride;
  if (kType == 0) dst[i] = reinterpret_cast<const float*>(row)[c];
  else if (kType == 1) dst[i] = fp16_to_f32(reinterpret_cast<const uint16_t*>(row)[c]);
  else dst[i] = bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[c]);
}

int grid_for(int64_t n, int threads) { return static_cast<int>((n + threads - 1) / threads); }

}  // namespace

void CudaBackend::dequantize(const WeightView& w, float* dst) {
  const TypeTraits* tr = type_traits(w.type);
  if (!tr || !tr->supported)
    throw Error("backend", "unsupported_type", strfmt("cuda dequantize: type %s is not supported", type_name(w.type)));
  if (w.n_rows <= 0 || w.n_cols <= 0) return;
  const auto* src = static_cast<const uint8_t*>(w.data);
  constexpr int kThreads = 256;
  const bool quantized = dispatch_weight(w, [&](auto bt) {
    using BT = decltype(bt);
    const int64_t bpr = w.n_cols / BT::qk;
    launch_kernel(dequantize_blocks_kernel<typename BT::block, BT::qk>, grid_for(w.n_rows * bpr, kThreads), kThreads,
                  0, stream_, src, dst, w.n_rows, bpr, w.row_stride);
  });
  if (!quantized) {
    const int64_t n = w.n_rows * w.n_cols;
    auto run = [&](auto kernel) {
      launch_kernel(kernel, grid_for(n, kThreads), kThreads, 0, stream_, src, dst, w.n_rows, w.n_cols, w.row_stride);
    };
    if (w.type == GGMLType::F32) run(dequantize_float_kernel<0>);
    else if (w.type == GGMLType::F16) run(dequantize_float_kernel<1>);
    else run(dequantize_float_kernel<2>);
  }
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gaacrt::cuda
