// attention_lossy_kivi2.cu — the lossy-cache attention kernel (kernels/attention_lossy.cuh) instantiated
// for the kivi2 cache: 1, 2 or 4 rows per warp x tiles of 32, 64, 96, 128 channels or two of 128.
#include "kernels/attention_lossy.cuh"

namespace gaacrt::cuda::lossy::detail {

void launch_kivi2(const KVLayerView& kv, int32_t G, const Args& P, dim3 grid, int max_smem, cudaStream_t stream) {
  launch_rows<KVFormat::KIVI2>(kv, G, P, grid, max_smem, stream);
}

}  // namespace gaacrt::cuda::lossy::detail
