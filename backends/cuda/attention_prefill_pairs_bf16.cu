// attention_prefill_pairs_bf16.cu — the tensor-core attention kernel (kernels/attention_mma.cuh) for the
// BF16 cache with its prefill-sized sequences in row groups of 64 on one stream of blocks per
// thread block in steps of two blocks, with two bf16 parts of the queries and weights
// (attention_wide.cuh prefill_wide; head size 128, the three-block build); a file of its own so
// that nvcc builds it beside attention_prefill_bf16.cu.
#include "kernels/attention_mma.cuh"

namespace gaacrt::cuda::attn {

void launch_attention_prefill_pairs_bf16(const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device) {
  launch_one<128, false, 2, 3>(P, grid, smem, stream, device);
}

}  // namespace gaacrt::cuda::attn
