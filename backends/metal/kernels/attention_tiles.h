// attention_tiles.h — the only format-specific part of the attention kernel: how one K or V tile
// (16 tokens x tile_dim channels of one kv-head) gets into threadgroup memory. Each loader is a
// policy type with the same face (DESIGN.md rule 1: one attention template per backend, each cache
// format contributes its tile loader):
//   Elem                  what a tile holds (BF16 bits, or fp32 for the lossy formats)
//   value(Elem)           as fp32
//   ROTATED               its compressed keys live in the E8 rotated basis (score rotated queries)
//   load(ctx, entry, is_v, b3, b4, dst, pitch, col0, lane)
// load is run by one whole SIMD group (lane = its index in it); dst[t * pitch + col0 + c] receives
// channel c of token t. Returns false (uniformly) when a compressed tile fails validation.
// The lossy formats' loaders are in attention_tiles_lossy.h.
//   Bf16Tiles  every tile is a raw BF16 page (the baseline cache);
//   GaacTiles  a raw page, or a GAAC slot decoded in registers: lane l < tile_dim/4 owns one group
//              column and 8 groups (gaac_format.h's lane map); its escape offsets come from one SIMD
//              prefix sum over the lanes' (X count | raw count << 16), as the format intends.
// Both deliver exactly the BF16 bits of the tile (GAAC is lossless), so the kernel that follows
// computes the same floats in the same order: GAAC attention == BF16 attention, bit for bit.
#pragma once
#include "common.h"  // first: the portable headers call MSL functions unqualified
#include "codec/gaac/gaac_format.h"
#include "metal/kernels/kv_store.h"

namespace gaacrt {
namespace mtl {

// What every loader may need besides the tile: the layer, GAAC's slot capacities, E8's alpha.
struct TileCtx {
  KVLayerView kv;
  uint32_t capacity[2];
  float alpha;
};

// A raw BF16 page as it is (BF16 tiles) or as fp32 (lossy tiles).
inline uint16_t raw_elem(uint16_t b, uint16_t) { return b; }
inline float raw_elem(uint16_t b, float) { return bf16_to_f32(b); }
template <typename E>
inline void load_raw_tile(const device uint16_t* src, int32_t td, threadgroup E* dst, uint32_t pitch, uint32_t col0,
                          uint32_t lane) {
  for (uint32_t i = lane; i < (uint32_t)(KV_BLOCK_TOKENS * td); i += SIMD_WIDTH)
    dst[(i / (uint32_t)td) * pitch + col0 + i % (uint32_t)td] = raw_elem(src[i], E());
}

struct Bf16Tiles {
  typedef uint16_t Elem;
  static constexpr bool ROTATED = false;
  static float value(Elem e) { return bf16_to_f32(e); }
  static bool load(thread const TileCtx& c, uint32_t e, int32_t is_v, const device uint8_t*, const device uint8_t*,
                   threadgroup Elem* dst, uint32_t pitch, uint32_t col0, uint32_t lane) {
    load_raw_tile((const device uint16_t*)kv_entry_ptr(c.kv, e, is_v), c.kv.tile_dim, dst, pitch, col0, lane);
    return true;
  }
};

struct GaacTiles {
  typedef uint16_t Elem;
  static constexpr bool ROTATED = false;
  static float value(Elem e) { return bf16_to_f32(e); }
  static bool load(thread const TileCtx& c, uint32_t e, int32_t is_v, const device uint8_t* b3,
                   const device uint8_t* b4, threadgroup Elem* dst, uint32_t pitch, uint32_t col0, uint32_t lane) {
    const KVLayerView kv = c.kv;
    const uint32_t capacity = c.capacity[is_v];
    const int32_t td = kv.tile_dim;
    const device uint8_t* slot = kv_entry_ptr(kv, e, is_v);
    if (!kv_entry_is_slot(e)) {  // a tile that did not fit (or not yet finalized) keeps its raw page
      load_raw_tile((const device uint16_t*)slot, td, dst, pitch, col0, lane);
      return true;
    }
    const bool active = lane < (uint32_t)gaac_lanes(td);
    const uint32_t tags = active ? gaac_lane_tags(slot, td, (int32_t)lane) : 0u;
    const GaacTagMasks m = gaac_tag_masks(tags);
    const uint32_t counts = gaac_popc(m.x) | (gaac_popc(m.raw) << 16);
    const uint32_t before = simd_prefix_exclusive_sum(counts);
    const uint32_t total = simd_sum(counts);
    const uint32_t bad = simd_max(m.bad != 0 ? 1u : 0u);
    const uint32_t n_x = total & 0xFFFFu, n_raw = total >> 16;
    if (bad != 0 || n_x + 4u * n_raw > capacity) return false;  // reserved tag / escape overrun
    if (!active) return true;
    // The lane's 8 groups, as gaac_decode_lane does, into threadgroup memory.
    const int32_t G = gaac_group_cols(td), h = (int32_t)lane >= G ? 1 : 0, g = (int32_t)lane - h * G;
    const device uint8_t* esc = slot + gaac_fixed_bytes(td);
    uint32_t xo = before & 0xFFFFu, ro = n_x + 4u * (before >> 16);
    const GaacU32x2 w3 = {gaac_ld32(b3 + 8 * g), gaac_ld32(b3 + 8 * g + 4)};
    const GaacU32x2 w4 = {gaac_ld32(b4 + 8 * g), gaac_ld32(b4 + 8 * g + 4)};
    uint32_t w[6];
    for (int32_t k = 0; k < 6; ++k) w[k] = gaac_ld32(slot + gaac_code_word_offset(td, (int32_t)lane, k));
    for (int32_t j = 0; j < GAAC_LANE_GROUPS; ++j) {
      const uint32_t tag = (tags >> (2 * j)) & 3u;
      uint32_t x = 0, r4 = 0;
      if (tag != GAAC_TAG_3BIT) x = esc[xo++];
      if (tag == GAAC_TAG_RAW) { r4 = gaac_ld32(esc + ro); ro += 4; }
      const int32_t s = 3 * (j >> 2);
      const GaacU32x2 low3 = gaac_group_codes(w[s], w[s + 1], w[s + 2], j & 3);
      const GaacU32x2 ex = gaac_group_exponents(tag, w3, w4, low3, x, r4);
      const device uint8_t* sm = slot + gaac_sm_offset(td, (int32_t)lane, j);
      const GaacU32x2 p = gaac_bf16x4(gaac_ld32(sm), ex.lo), q = gaac_bf16x4(gaac_ld32(sm + 4), ex.hi);
      threadgroup uint16_t* o = dst + (uint32_t)gaac_lane_token(td, (int32_t)lane, j) * pitch + col0 + 8 * (uint32_t)g;
      o[0] = (uint16_t)p.lo; o[1] = (uint16_t)(p.lo >> 16); o[2] = (uint16_t)p.hi; o[3] = (uint16_t)(p.hi >> 16);
      o[4] = (uint16_t)q.lo; o[5] = (uint16_t)(q.lo >> 16); o[6] = (uint16_t)q.hi; o[7] = (uint16_t)(q.hi >> 16);
    }
    return true;
  }
};

}  // namespace mtl
}  // namespace gaacrt
