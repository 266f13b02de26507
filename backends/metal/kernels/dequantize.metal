// dequantize.metal — instances of dequantize.h for every weight type.
// Kernel names are <op>_<ggml type name>, as host/metal_plan.cpp asks for them.
#include "metal/kernels/dequantize.h"

namespace gaacrt {
namespace mtl {
GAACRT_KERNEL("dequantize_f32", dequantize<FloatRow<F32Elem>>)
GAACRT_KERNEL("dequantize_f16", dequantize<FloatRow<F16Elem>>)
GAACRT_KERNEL("dequantize_bf16", dequantize<FloatRow<BF16Elem>>)
GAACRT_KERNEL("dequantize_q4_0", dequantize<QuantRow<block_q4_0>>)
GAACRT_KERNEL("dequantize_q4_1", dequantize<QuantRow<block_q4_1>>)
GAACRT_KERNEL("dequantize_q5_0", dequantize<QuantRow<block_q5_0>>)
GAACRT_KERNEL("dequantize_q5_1", dequantize<QuantRow<block_q5_1>>)
GAACRT_KERNEL("dequantize_q8_0", dequantize<QuantRow<block_q8_0>>)
GAACRT_KERNEL("dequantize_iq4_nl", dequantize<QuantRow<block_iq4_nl>>)
GAACRT_KERNEL("dequantize_q4_K", dequantize<QuantRow<block_q4_k>>)
GAACRT_KERNEL("dequantize_q5_K", dequantize<QuantRow<block_q5_k>>)
GAACRT_KERNEL("dequantize_q6_K", dequantize<QuantRow<block_q6_k>>)
GAACRT_KERNEL("dequantize_iq4_xs", dequantize<QuantRow<block_iq4_xs>>)
}  // namespace mtl
}  // namespace gaacrt
