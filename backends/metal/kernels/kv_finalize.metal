// kv_finalize.metal — instances of kv_finalize.h (one per cache format with compressed slots).
#include "metal/kernels/kv_finalize.h"

namespace gaacrt {
namespace mtl {
GAACRT_KERNEL("kv_finalize_gaac", kv_finalize_gaac<uint16_t>)
}  // namespace mtl
}  // namespace gaacrt
