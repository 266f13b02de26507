// attention_prefill_wgmma_bf16.cu — the tensor-core attention kernel (kernels/attention_mma.cuh) for
// BF16 pages with its prefill-sized sequences on Hopper's warpgroup mma (kShared = 3: the two-block
// steps of attention_prefill_pairs_bf16.cu, their q·k and p·v as wgmma; attention_wide.cuh
// wg_block_math). wgmma is an sm_90a instruction: this file is built for sm_90a alone, in a library
// of its own (backends/cuda/CMakeLists.txt), and attention.cu launches it only on a device of
// compute capability 9.0.
#include "kernels/attention_mma.cuh"

namespace gaacrt::cuda::attn {

bool launch_attention_prefill_wgmma_bf16(const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device,
                                         int steps) {
  if (steps == 4) launch_one<128, false, 4, 3>(P, grid, smem, stream, device);
  else launch_one<128, false, 3, 3>(P, grid, smem, stream, device);
  return true;
}

}  // namespace gaacrt::cuda::attn
