// attention_prefill_pairs_bf16.cu — the tensor-core attention kernel (kernels/attention_mma.cuh) for the
// BF16 cache with its prefill-sized sequences in row groups of 64 on one stream of blocks per
// thread block, the variants of GAACRT_CUDA_PREFILL_WIDE=2|3|4 (attention_wide.cuh prefill_wide:
// steps of two blocks with three or two bf16 parts of the queries and weights; one-block steps with
// two parts and the queries in shared memory);
// a file of its own so that nvcc builds it beside attention_prefill_bf16.cu.
#include "kernels/attention_mma.cuh"

namespace gaacrt::cuda::attn {

void launch_attention_prefill_pairs_bf16(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream,
                                         int device, int blocks, int variant) {
  launch_pairs<false>(kD, P, grid, smem, stream, device, blocks, variant);
}

}  // namespace gaacrt::cuda::attn
