// elementwise.metal — instances of elementwise.h.
#include "metal/kernels/elementwise.h"

namespace gaacrt {
namespace mtl {
GAACRT_KERNEL("add_f32", add<float>)
GAACRT_KERNEL("act_mul_silu", act_mul<SiluAct>)
GAACRT_KERNEL("act_mul_gelu_tanh", act_mul<GeluTanhAct>)
GAACRT_KERNEL("softcap_f32", softcap<float>)
}  // namespace mtl
}  // namespace gaacrt
