// place_weight.cu — weights into device memory. Q4_0, Q8_0 and Q6_K rows of whole groups of eight
// blocks are regrouped (quant/group8.h: each group's scales, then its quant arrays) so the decode
// matvec and the prefill matmul read them with aligned 8- and 16-byte loads; everything else keeps
// the GGUF bytes. GAACRT_CUDA_GROUP8=0 keeps the GGUF layout for every weight (for comparisons).
#include <algorithm>
#include <cstdlib>

#include "block_traits.cuh"
#include "cuda_backend.h"
#include "cuda_common.h"

namespace gaacrt::cuda {
namespace {

// One thread per block: GGUF row r of src to regrouped row r of dst.
template <typename B>
__global__ void group8_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst, int64_t n_rows,
                              int64_t blocks_per_row, size_t row_stride) {
  pdl_begin();
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_rows * blocks_per_row) return;
  const int64_t r = i / blocks_per_row;
  group8_place_block<B>(src + r * row_stride, dst + r * row_stride, (uint32_t)(i % blocks_per_row));
}

bool group8_enabled() {  // read per weight (loading is not hot), so a test can switch it
  const char* e = std::getenv("GAACRT_CUDA_GROUP8");
  return !(e && e[0] == '0');
}

// Device memory freed when it goes out of scope (the staging copy).
struct Staging {
  CudaBackend& be;
  void* p;
  ~Staging() { be.free(p); }
};

}  // namespace

WeightView CudaBackend::place_weight(const WeightView& host, void** owned) {
  if (!group8_enabled() || !group8_eligible(host.type, host.n_cols) || host.n_rows <= 0)
    return Backend::place_weight(host, owned);
  // The GGUF rows go up through a staging buffer of at most kStagingBytes (whole rows), each
  // chunk regrouped into place by a kernel: loading needs the weight plus that much, not twice
  // the weight. The stream orders a chunk's upload after the previous chunk's kernel.
  constexpr size_t kStagingBytes = 64 << 20;
  const size_t n = (size_t)host.n_rows * host.row_stride;
  const int64_t rows_per_chunk = std::max<int64_t>(1, (int64_t)(kStagingBytes / host.row_stride));
  Staging staging{*this, alloc(std::min(n, (size_t)rows_per_chunk * host.row_stride))};
  void* dst = alloc(n);
  WeightView w = host;
  w.data = dst;
  w.layout = WeightLayout::Group8;
  try {
    dispatch_group8_type(host.type, [&](auto bt) {
      using BT = decltype(bt);
      const int64_t bpr = host.n_cols / BT::qk;
      constexpr int kThreads = 256;
      for (int64_t r0 = 0; r0 < host.n_rows; r0 += rows_per_chunk) {
        const int64_t rows = std::min(rows_per_chunk, host.n_rows - r0);
        const size_t off = (size_t)r0 * host.row_stride;
        upload(staging.p, static_cast<const uint8_t*>(host.data) + off, (size_t)rows * host.row_stride);
        launch_kernel(group8_kernel<typename StoredBlock<typename BT::block>::block>,
                      (unsigned)((rows * bpr + kThreads - 1) / kThreads), kThreads, 0, stream_,
                      static_cast<const uint8_t*>(staging.p), static_cast<uint8_t*>(dst) + off, rows, bpr,
                      host.row_stride);
        GAACRT_CUDA_CHECK(cudaGetLastError());
      }
    });
    synchronize();  // before the staging buffer is freed
  } catch (...) {
    free(dst);
    throw;
  }
  *owned = dst;
  return w;
}

}  // namespace gaacrt::cuda
