// get_rows.cu — embedding lookup on the GPU: rows ids[i] of the embedding matrix dequantized
// through the portable dequant_block() (bit-identical to the CPU), times the embedding scale.
// The ids live in device memory, so the step does not depend on host-side token values.
#include "block_traits.cuh"
#include "common/half.h"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "quant/dequant.h"

namespace gaacrt::cuda {
namespace {

constexpr int kThreads = 128;

// One thread block per output row, one thread per weight block of the row.
template <typename Block, int QK>
__global__ void get_rows_blocks_kernel(const uint8_t* __restrict__ emb, size_t row_stride, int64_t n_cols,
                                       const int32_t* __restrict__ ids, float scale, float* __restrict__ out) {
  pdl_begin();
  const uint8_t* blocks = emb + (size_t)ids[blockIdx.x] * row_stride;
  float* row = out + (int64_t)blockIdx.x * n_cols;
  for (int64_t b = threadIdx.x; b < n_cols / QK; b += blockDim.x) {
    float v[QK];
    dequant_block(StoredBlock<Block>::at(blocks, b), v);
    for (int j = 0; j < QK; ++j) row[b * QK + j] = scale != 1.f ? v[j] * scale : v[j];
  }
}

template <int kType>
__global__ void get_rows_float_kernel(const uint8_t* __restrict__ emb, size_t row_stride, int64_t n_cols,
                                      const int32_t* __restrict__ ids, float scale, float* __restrict__ out) {
  pdl_begin();
  const uint8_t* src = emb + (size_t)ids[blockIdx.x] * row_stride;
  float* row = out + (int64_t)blockIdx.x * n_cols;
  for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x) {
    float v;
    if (kType == 0) v = reinterpret_cast<const float*>(src)[c];
    else if (kType == 1) v = fp16_to_f32(reinterpret_cast<const uint16_t*>(src)[c]);
    else v = bf16_to_f32(reinterpret_cast<const uint16_t*>(src)[c]);
    row[c] = scale != 1.f ? v * scale : v;
  }
}

}  // namespace

void CudaBackend::get_rows(const WeightView& emb, const int32_t* ids, int64_t n, float scale, float* out) {
  const TypeTraits* tr = type_traits(emb.type);
  if (!tr || !tr->supported)
    throw Error("backend", "unsupported_type", strfmt("cuda get_rows: type %s is not supported", type_name(emb.type)));
  if (n <= 0) return;
  if (n > 0x7fffffff) throw Error("backend", "invalid_argument", strfmt("cuda get_rows: %lld rows", (long long)n));
  const auto* src = static_cast<const uint8_t*>(emb.data);
  const unsigned grid = (unsigned)n;
  const bool quantized = dispatch_weight(emb, [&](auto bt) {
    using BT = decltype(bt);
    launch_kernel(get_rows_blocks_kernel<typename BT::block, BT::qk>, grid, kThreads, 0, stream_, src, emb.row_stride,
                  emb.n_cols, ids, scale, out);
  });
  if (!quantized) {
    auto run = [&](auto kernel) {
      launch_kernel(kernel, grid, kThreads, 0, stream_, src, emb.row_stride, emb.n_cols, ids, scale, out);
    };
    if (emb.type == GGMLType::F32) run(get_rows_float_kernel<0>);
    else if (emb.type == GGMLType::F16) run(get_rows_float_kernel<1>);
    else run(get_rows_float_kernel<2>);
  }
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gaacrt::cuda
