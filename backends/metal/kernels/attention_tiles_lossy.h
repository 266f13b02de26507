// attention_tiles_lossy.h — tile loaders of the fixed-slot lossy formats (shared/spec/e8.md), the
// same face as attention_tiles.h, fp32 tiles: q8 (scale x int8 per 32 channels), KIVI-2 keys
// (2-bit codes per channel) and 2-bit values (per token and 32 channels) for KIVI and E8, and E8
// keys (per token: 4-code quads of 8-dim E8P12 codewords, times norm / alpha, in the rotated basis:
// ROTATED). Tiles inside the raw window are raw BF16 pages, converted. The decode expressions are
// the CPU's (backends/cpu/kv_finalize_lossy.cpp decode_lossy_tile, scalar_codecs.cpp).
#pragma once
#include "common.h"  // first: the portable headers call MSL functions unqualified
#include "codec/e8/e8_codebook.h"
#include "codec/e8/e8_layout.h"
#include "codec/scalar/asym2.h"
#include "codec/scalar/q8_tile.h"
#include "metal/kernels/attention_tiles.h"

namespace gaacrt {
namespace mtl {

inline void load_v2_tile(const device uint8_t* slot, int32_t T, threadgroup float* dst, uint32_t pitch, uint32_t col0,
                         uint32_t lane) {
  for (uint32_t i = lane; i < (uint32_t)(KV_BLOCK_TOKENS * T); i += SIMD_WIDTH) {
    const int32_t t = (int32_t)i / T, c = (int32_t)i % T;
    dst[(uint32_t)t * pitch + col0 + (uint32_t)c] =
        asym2_value(v2_code(slot, T, t, c), v2_params(slot, T, t, c / ASYM2_VGROUP));
  }
}

// (Each loader states Elem and value itself: MSL has no derived classes.)
struct Q8Tiles {
  typedef float Elem;
  static float value(Elem e) { return e; }
  static constexpr bool ROTATED = false;
  static bool load(thread const TileCtx& c, uint32_t e, int32_t is_v, const device uint8_t*, const device uint8_t*,
                   threadgroup Elem* dst, uint32_t pitch, uint32_t col0, uint32_t lane) {
    const int32_t T = c.kv.tile_dim;
    const device uint8_t* slot = kv_entry_ptr(c.kv, e, is_v);
    if (!kv_entry_is_slot(e)) {
      load_raw_tile((const device uint16_t*)slot, T, dst, pitch, col0, lane);
      return true;
    }
    for (uint32_t i = lane; i < (uint32_t)(KV_BLOCK_TOKENS * T); i += SIMD_WIDTH) {
      const int32_t t = (int32_t)i / T, ch = (int32_t)i % T;
      dst[(uint32_t)t * pitch + col0 + (uint32_t)ch] = q8_scale(slot, T, t, ch / Q8_GROUP) * (float)q8_qs(slot, T, t, ch);
    }
    return true;
  }
};

struct Kivi2Tiles {
  typedef float Elem;
  static float value(Elem e) { return e; }
  static constexpr bool ROTATED = false;
  static bool load(thread const TileCtx& c, uint32_t e, int32_t is_v, const device uint8_t*, const device uint8_t*,
                   threadgroup Elem* dst, uint32_t pitch, uint32_t col0, uint32_t lane) {
    const int32_t T = c.kv.tile_dim;
    const device uint8_t* slot = kv_entry_ptr(c.kv, e, is_v);
    if (!kv_entry_is_slot(e)) {
      load_raw_tile((const device uint16_t*)slot, T, dst, pitch, col0, lane);
    } else if (is_v) {
      load_v2_tile(slot, T, dst, pitch, col0, lane);
    } else {
      for (uint32_t i = lane; i < (uint32_t)(KV_BLOCK_TOKENS * T); i += SIMD_WIDTH) {
        const int32_t t = (int32_t)i / T, ch = (int32_t)i % T;
        dst[(uint32_t)t * pitch + col0 + (uint32_t)ch] =
            asym2_value((kivi2_k_word(slot, ch) >> (2 * t)) & 3u, kivi2_k_params(slot, T, ch));
      }
    }
    return true;
  }
};

struct E8Tiles {
  typedef float Elem;
  static float value(Elem e) { return e; }
  static constexpr bool ROTATED = true;
  static bool load(thread const TileCtx& c, uint32_t e, int32_t is_v, const device uint8_t*, const device uint8_t*,
                   threadgroup Elem* dst, uint32_t pitch, uint32_t col0, uint32_t lane) {
    const int32_t T = c.kv.tile_dim;
    const device uint8_t* slot = kv_entry_ptr(c.kv, e, is_v);
    if (!kv_entry_is_slot(e)) {
      load_raw_tile((const device uint16_t*)slot, T, dst, pitch, col0, lane);
    } else if (is_v) {
      load_v2_tile(slot, T, dst, pitch, col0, lane);
    } else {
      // Lane per (token, quad): 4 codes, 32 rotated channels.
      const uint32_t nq = (uint32_t)(T / E8_QUAD_DIMS);
      for (uint32_t i = lane; i < KV_BLOCK_TOKENS * nq; i += SIMD_WIDTH) {
        const int32_t t = (int32_t)(i / nq), q = (int32_t)(i % nq);
        const float s = e8_k_norm(slot, T, t) / c.alpha;
        const E8Quad quad = e8_k_quad(slot, T, t, q);
        for (int32_t b = 0; b < E8_QUAD; ++b) {
          const uint32_t code = e8_quad_code(quad, b);
          const E8Vec8 g = e8_decode_word(e8_packed_table[e8_code_proto(code)], code);
          for (int32_t k = 0; k < E8_BLOCK; ++k)
            dst[(uint32_t)t * pitch + col0 + (uint32_t)(q * E8_QUAD_DIMS + b * E8_BLOCK + k)] = g.v[k] * s;
        }
      }
    }
    return true;
  }
};

}  // namespace mtl
}  // namespace gaacrt
