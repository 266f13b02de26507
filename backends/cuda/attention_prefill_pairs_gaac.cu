// attention_prefill_pairs_gaac.cu — the tensor-core attention kernel (kernels/attention_mma.cuh) for the
// GAAC cache with its prefill-sized sequences in row groups of 64 on one stream of blocks per
// thread block, in steps of two blocks (attention_wide.cuh prefill_wide), with three bf16 parts of
// the queries and weights (GAACRT_CUDA_PREFILL_WIDE=2) or two (=3);
// a file of its own so that nvcc builds it beside attention_prefill_gaac.cu.
#include "kernels/attention_mma.cuh"

namespace gaacrt::cuda::attn {

void launch_attention_prefill_pairs_gaac(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream,
                                         int device, int blocks, int parts) {
  launch_pairs<true>(kD, P, grid, smem, stream, device, blocks, parts);
}

}  // namespace gaacrt::cuda::attn
