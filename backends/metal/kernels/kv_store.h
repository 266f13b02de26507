// kv_store.h — append this step's K and V (fp32, keys after RoPE) to their raw BF16 pages:
// one threadgroup per (kv-head, token), one thread per channel. backends/cpu/kv_store.cpp is the
// reference (the same f32_to_bf16 from src/common/half.h: bit-identical pages).
#pragma once
#include "common.h"
#include "common/half.h"
#include "kv/kv_view.h"
#include "metal/kernels/args.h"

namespace gaacrt {
namespace mtl {

// The cache layer as kv_view.h's helpers want it, from the scalar arguments and the bound arena.
template <typename Args>
inline KVLayerView kv_view_of(constant Args& a, device uint8_t* arena, uint64_t chunk_bytes, uint64_t slot_k,
                              uint64_t slot_v) {
  KVLayerView kv;
  kv.format = KVFormat::BF16;  // not read by the address helpers
  kv.layer = 0;
  kv.n_head_kv = 0;
  kv.head_dim_k = (int32_t)a.dk;
  kv.head_dim_v = (int32_t)a.dv;
  kv.tile_dim = (int32_t)a.tile_dim;
  kv.n_half = (int32_t)a.n_half;
  kv.max_blocks = (int32_t)a.max_blocks;
  kv.arena = arena;
  kv.page_bytes = a.page_bytes;
  kv.chunk_bytes = chunk_bytes;
  kv.slot_bytes[0] = slot_k;
  kv.slot_bytes[1] = slot_v;
  kv.codec = arena;
  return kv;
}

// tok(n_tok): staged table offset and position of each token; tables: the staged block tables;
// k(n_tok, n_head_kv, dk), v(n_tok, n_head_kv, dv).
template <typename T>
kernel void kv_store(constant KVStoreArgs& a [[buffer(0)]], device const KVTokenRef* tok [[buffer(1)]],
                     device const uint32_t* tables [[buffer(2)]], device const T* k [[buffer(3)]],
                     device const T* v [[buffer(4)]], device uint8_t* arena [[buffer(5)]], GAACRT_POSITIONS) {
  const uint32_t h = tgpig.x, t = tgpig.y, c = tiitg;
  const device KVTokenRef& r = tok[t];
  const KVLayerView kv = kv_view_of(a, arena, 0, 0, 0);
  const int32_t block = r.pos / KV_BLOCK_TOKENS, row = r.pos % KV_BLOCK_TOKENS;
  for (int32_t is_v = 0; is_v < 2; ++is_v) {
    const uint32_t d = is_v ? a.dv : a.dk;
    if (c >= d) continue;
    const device T* src = is_v ? v + ((uint64_t)t * a.n_head_kv + h) * a.dv : k + ((uint64_t)t * a.n_head_kv + h) * a.dk;
    const int32_t half = (int32_t)(c / a.tile_dim), cc = (int32_t)(c % a.tile_dim);
    const uint32_t e = tables[r.table + (uint32_t)kv_entry_index(kv, (int32_t)h, is_v, half, block)];
    device uint16_t* page = (device uint16_t*)kv_entry_ptr(kv, e, is_v);
    page[row * (int32_t)a.tile_dim + cc] = f32_to_bf16(src[c]);
  }
}

}  // namespace mtl
}  // namespace gaacrt
