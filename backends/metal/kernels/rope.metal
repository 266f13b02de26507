// rope.metal — instances of rope.h.
#include "metal/kernels/rope.h"

namespace gaacrt {
namespace mtl {
GAACRT_KERNEL("rope_f32", rope<float>)
}  // namespace mtl
}  // namespace gaacrt
