// kv_finalize.metal — instances of kv_finalize.h (GAAC) and kv_finalize_lossy.h (q8, KIVI-2,
// 2-bit values, E8 keys), and the E8 query rotation (e8_math.h).
#include "metal/kernels/kv_finalize.h"
#include "metal/kernels/kv_finalize_lossy.h"

namespace gaacrt {
namespace mtl {
GAACRT_KERNEL("kv_finalize_gaac", kv_finalize_gaac<uint16_t>)
GAACRT_KERNEL("kv_finalize_scalar", kv_finalize_scalar<uint16_t>)
GAACRT_KERNEL("kv_finalize_e8_keys", kv_finalize_e8_keys<uint16_t>)
GAACRT_KERNEL("rotate_rows", rotate_rows<float>)
}  // namespace mtl
}  // namespace gaacrt
