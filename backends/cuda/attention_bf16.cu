// attention_bf16.cu — the tensor-core attention kernel (kernels/attention_mma.cuh) instantiated for
// the BF16 cache, one kernel per head size (16, 32, 64, 128, 256 channels; smaller heads padded).
#include "kernels/attention_mma.cuh"

namespace gaacrt::cuda::attn {

void launch_attention_bf16(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device,
                           int blocks) {
  launch_dims<false>(kD, P, grid, smem, stream, device, blocks);
}

}  // namespace gaacrt::cuda::attn
