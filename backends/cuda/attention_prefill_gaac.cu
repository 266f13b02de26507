// attention_prefill_gaac.cu — the tensor-core attention kernel (kernels/attention_mma.cuh) for the
// GAAC cache with its prefill-sized sequences on one stream of blocks per thread block
// (run_rows_shared: each block's slots staged and decoded once for the four warps), for launches
// that have such a sequence; a file of its own so that nvcc builds it beside attention_gaac.cu.
#include "kernels/attention_mma.cuh"

namespace gaacrt::cuda::attn {

void launch_attention_prefill_gaac(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream,
                                   int device, int blocks) {
  launch_dims<true, true>(kD, P, grid, smem, stream, device, blocks);
}

}  // namespace gaacrt::cuda::attn
