// attention_e8.cu — the tensor-core attention kernel of E8 k2v2 caches (kernels/attention_e8_mma.cuh),
// one kernel per head size (32, 64, 128 channels), one more each for launches whose prefill-sized
// sequences it takes too, and one more each for decode launches taking blocks two at a time.
#include <type_traits>

#include "kernels/attention_e8_mma.cuh"

namespace gaacrt::cuda::attn {

void launch_attention_e8(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device,
                         bool prefill, bool pairs) {
  auto run = [&](auto pre, auto two) {
    constexpr bool kPre = decltype(pre)::value, kTwo = decltype(two)::value;
    switch (kD) {
      case 32: launch_attention_kernel<attention_e8_mma_kernel<32, kPre, kTwo>>(P, grid, smem, stream, device); break;
      case 64: launch_attention_kernel<attention_e8_mma_kernel<64, kPre, kTwo>>(P, grid, smem, stream, device); break;
      default: launch_attention_kernel<attention_e8_mma_kernel<128, kPre, kTwo>>(P, grid, smem, stream, device); break;
    }
  };
  if (prefill) run(std::true_type{}, std::false_type{});
  else if (pairs) run(std::false_type{}, std::true_type{});
  else run(std::false_type{}, std::false_type{});
}

}  // namespace gaacrt::cuda::attn
