// attention_e8.cu — the tensor-core attention kernel of E8 k2v2 caches on decode steps
// (kernels/attention_e8_mma.cuh), one kernel per head size (32, 64, 128 channels).
#include "kernels/attention_e8_mma.cuh"

namespace gaacrt::cuda::attn {

void launch_attention_e8(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device) {
  switch (kD) {
    case 32: launch_attention_kernel<attention_e8_mma_kernel<32>>(P, grid, smem, stream, device); break;
    case 64: launch_attention_kernel<attention_e8_mma_kernel<64>>(P, grid, smem, stream, device); break;
    default: launch_attention_kernel<attention_e8_mma_kernel<128>>(P, grid, smem, stream, device); break;
  }
}

}  // namespace gaacrt::cuda::attn
