// attention_gaac.cu — the tensor-core attention kernel (kernels/attention_mma.cuh) instantiated for
// the GAAC cache: the same kernel as attention_bf16.cu but for the tile loader, which decodes the
// slots (codec/gaac/gaac_format.h) into the BF16 rows the rest of the kernel reads.
#include "kernels/attention_mma.cuh"

namespace gaacrt::cuda::attn {

void launch_attention_gaac(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device,
                           int blocks) {
  launch_dims<true>(kD, P, grid, smem, stream, device, blocks);
}

}  // namespace gaacrt::cuda::attn
