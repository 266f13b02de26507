// get_rows.metal — instances of get_rows (dequantize.h) for every weight type.
// Kernel names are <op>_<ggml type name>, as host/metal_plan.cpp asks for them.
#include "metal/kernels/dequantize.h"

namespace gaacrt {
namespace mtl {
GAACRT_KERNEL("get_rows_f32", get_rows<FloatRow<F32Elem>>)
GAACRT_KERNEL("get_rows_f16", get_rows<FloatRow<F16Elem>>)
GAACRT_KERNEL("get_rows_bf16", get_rows<FloatRow<BF16Elem>>)
GAACRT_KERNEL("get_rows_q4_0", get_rows<QuantRow<block_q4_0>>)
GAACRT_KERNEL("get_rows_q4_1", get_rows<QuantRow<block_q4_1>>)
GAACRT_KERNEL("get_rows_q5_0", get_rows<QuantRow<block_q5_0>>)
GAACRT_KERNEL("get_rows_q5_1", get_rows<QuantRow<block_q5_1>>)
GAACRT_KERNEL("get_rows_q8_0", get_rows<QuantRow<block_q8_0>>)
GAACRT_KERNEL("get_rows_iq4_nl", get_rows<QuantRow<block_iq4_nl>>)
GAACRT_KERNEL("get_rows_q4_K", get_rows<QuantRow<block_q4_k>>)
GAACRT_KERNEL("get_rows_q5_K", get_rows<QuantRow<block_q5_k>>)
GAACRT_KERNEL("get_rows_q6_K", get_rows<QuantRow<block_q6_k>>)
GAACRT_KERNEL("get_rows_iq4_xs", get_rows<QuantRow<block_iq4_xs>>)
}  // namespace mtl
}  // namespace gaacrt
