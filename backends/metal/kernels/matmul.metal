// matmul.metal — instances of matmul.h (matvec and matmul) for every weight type.
// Kernel names are <op>_<ggml type name>, as host/metal_plan.cpp asks for them.
#include "metal/kernels/matmul.h"

namespace gaacrt {
namespace mtl {
GAACRT_KERNEL("matvec_f32", matvec<FloatRow<F32Elem>>)
GAACRT_KERNEL("matvec_f16", matvec<FloatRow<F16Elem>>)
GAACRT_KERNEL("matvec_bf16", matvec<FloatRow<BF16Elem>>)
GAACRT_KERNEL("matvec_q4_0", matvec<QuantRow<block_q4_0>>)
GAACRT_KERNEL("matvec_q4_1", matvec<QuantRow<block_q4_1>>)
GAACRT_KERNEL("matvec_q5_0", matvec<QuantRow<block_q5_0>>)
GAACRT_KERNEL("matvec_q5_1", matvec<QuantRow<block_q5_1>>)
GAACRT_KERNEL("matvec_q8_0", matvec<QuantRow<block_q8_0>>)
GAACRT_KERNEL("matvec_iq4_nl", matvec<QuantRow<block_iq4_nl>>)
GAACRT_KERNEL("matvec_q4_K", matvec<QuantRow<block_q4_k>>)
GAACRT_KERNEL("matvec_q5_K", matvec<QuantRow<block_q5_k>>)
GAACRT_KERNEL("matvec_q6_K", matvec<QuantRow<block_q6_k>>)
GAACRT_KERNEL("matvec_iq4_xs", matvec<QuantRow<block_iq4_xs>>)
GAACRT_KERNEL("matmul_f32", matmul<FloatRow<F32Elem>>)
GAACRT_KERNEL("matmul_f16", matmul<FloatRow<F16Elem>>)
GAACRT_KERNEL("matmul_bf16", matmul<FloatRow<BF16Elem>>)
GAACRT_KERNEL("matmul_q4_0", matmul<QuantRow<block_q4_0>>)
GAACRT_KERNEL("matmul_q4_1", matmul<QuantRow<block_q4_1>>)
GAACRT_KERNEL("matmul_q5_0", matmul<QuantRow<block_q5_0>>)
GAACRT_KERNEL("matmul_q5_1", matmul<QuantRow<block_q5_1>>)
GAACRT_KERNEL("matmul_q8_0", matmul<QuantRow<block_q8_0>>)
GAACRT_KERNEL("matmul_iq4_nl", matmul<QuantRow<block_iq4_nl>>)
GAACRT_KERNEL("matmul_q4_K", matmul<QuantRow<block_q4_k>>)
GAACRT_KERNEL("matmul_q5_K", matmul<QuantRow<block_q5_k>>)
GAACRT_KERNEL("matmul_q6_K", matmul<QuantRow<block_q6_k>>)
GAACRT_KERNEL("matmul_iq4_xs", matmul<QuantRow<block_iq4_xs>>)
}  // namespace mtl
}  // namespace gaacrt
