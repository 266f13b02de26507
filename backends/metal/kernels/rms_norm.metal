// rms_norm.metal — instances of rms_norm.h.
#include "metal/kernels/rms_norm.h"

namespace gaacrt {
namespace mtl {
GAACRT_KERNEL("rms_norm_f32", rms_norm<float>)
}  // namespace mtl
}  // namespace gaacrt
