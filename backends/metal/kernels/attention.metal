// attention.metal — instances of attention.h: one per cache format's tile loader, and the merge.
#include "metal/kernels/attention.h"

namespace gaacrt {
namespace mtl {
GAACRT_KERNEL("attention_bf16", attention<Bf16Tiles>)
GAACRT_KERNEL("attention_gaac", attention<GaacTiles>)
GAACRT_KERNEL("attention_q8", attention<Q8Tiles>)
GAACRT_KERNEL("attention_kivi2", attention<Kivi2Tiles>)
GAACRT_KERNEL("attention_e8", attention<E8Tiles>)
GAACRT_KERNEL("attention_merge", attention_merge<float>)
}  // namespace mtl
}  // namespace gaacrt
