// kv_finalize.h — encode full 16-token tiles into the cache format's compressed slots (DESIGN.md
// "KV cache", lifecycle). GAAC: one thread per job runs the portable reference encoder
// gaac_encode_tile (src/codec/gaac/gaac_format.h) on the raw page — the same code the CPU backend
// runs, so the slots are byte-identical; a tile whose escapes exceed the slot capacity reports
// fits = 0 and keeps its raw page.
#pragma once
#include "common.h"  // first: the portable headers call MSL functions unqualified
#include "codec/gaac/gaac_format.h"
#include "metal/kernels/kv_store.h"

namespace gaacrt {
namespace mtl {

// jobs(n_jobs) in/out; b3k/b4k/b3v/b4v: the layer's GAAC bases [n_head_kv][head_dim] per K/V and mode.
template <typename T>
kernel void kv_finalize_gaac(constant KVFinalizeArgs& a [[buffer(0)]], device KVFinalizeJob* jobs [[buffer(1)]],
                             device uint8_t* arena [[buffer(2)]], device const uint8_t* b3k [[buffer(3)]],
                             device const uint8_t* b4k [[buffer(4)]], device const uint8_t* b3v [[buffer(5)]],
                             device const uint8_t* b4v [[buffer(6)]], GAACRT_POSITIONS) {
  const uint32_t i = tgpig.x * FINALIZE_THREADS + tiitg;
  if (i >= a.n_jobs) return;
  const KVLayerView kv = kv_view_of(a, arena, a.chunk_bytes, a.slot_bytes[0], a.slot_bytes[1]);
  const device KVFinalizeJob& j = jobs[i];
  const int32_t d = (int32_t)a.tile_dim;
  const device T* raw = (const device T*)(arena + (uint64_t)j.raw_page * a.page_bytes);
  const uint32_t off = (uint32_t)j.head * (j.is_v ? a.dv : a.dk) + (uint32_t)j.half * (uint32_t)d;
  const device uint8_t* b3 = (j.is_v ? b3v : b3k) + off;
  const device uint8_t* b4 = (j.is_v ? b4v : b4k) + off;
  const int32_t r = gaac_encode_tile(raw, d, d, b3, b4, a.capacity[j.is_v], kv_entry_ptr(kv, j.slot, j.is_v));
  jobs[i].fits = r >= 0 ? 1 : 0;
  jobs[i].escape_bytes = r >= 0 ? r : 0;
}

}  // namespace mtl
}  // namespace gaacrt
