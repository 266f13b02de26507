// kv_store.metal — instances of kv_store.h.
#include "metal/kernels/kv_store.h"

namespace gaacrt {
namespace mtl {
GAACRT_KERNEL("kv_store_f32", kv_store<float>)
}  // namespace mtl
}  // namespace gaacrt
