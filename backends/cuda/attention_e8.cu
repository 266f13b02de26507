// attention_e8.cu — the tensor-core attention kernel of E8 k2v2 caches (kernels/attention_e8_mma.cuh),
// one kernel per head size (32, 64, 128 channels), and one more each for launches whose prefill-
// sized sequences it takes too.
#include <type_traits>

#include "kernels/attention_e8_mma.cuh"

namespace gaacrt::cuda::attn {

void launch_attention_e8(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device,
                         bool prefill) {
  auto run = [&](auto pre) {
    constexpr bool kPre = decltype(pre)::value;
    switch (kD) {
      case 32: launch_attention_kernel<attention_e8_mma_kernel<32, kPre>>(P, grid, smem, stream, device); break;
      case 64: launch_attention_kernel<attention_e8_mma_kernel<64, kPre>>(P, grid, smem, stream, device); break;
      default: launch_attention_kernel<attention_e8_mma_kernel<128, kPre>>(P, grid, smem, stream, device); break;
    }
  };
  if (prefill) run(std::true_type{});
  else run(std::false_type{});
}

}  // namespace gaacrt::cuda::attn
