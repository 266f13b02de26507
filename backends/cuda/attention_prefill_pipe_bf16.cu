// attention_prefill_pipe_bf16.cu — the tensor-core attention kernel (kernels/attention_mma.cuh) for
// the BF16 cache's prefill-sized sequences in two-block steps with two bf16 parts, pipelined: each
// step's q·k is issued before the softmax and p·v of the step before (attention_wide.cuh
// prefill_wide's kPipe); head size 128, the three-block build. A file of its own so that nvcc
// builds it beside the others.
#include "kernels/attention_mma.cuh"

namespace gaacrt::cuda::attn {

void launch_attention_prefill_pipe_bf16(const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device) {
  launch_one<128, false, 4, 3>(P, grid, smem, stream, device);
}

}  // namespace gaacrt::cuda::attn
