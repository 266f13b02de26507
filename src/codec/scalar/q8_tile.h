// q8_tile.h — the q8 cache format: per token, groups of 32 channels, symmetric int8 with an fp16
// scale, i.e. GGUF's Q8_0 block (portable: C++, CUDA and MSL include this file).
//
// Quantization is Q8_0's reference rule (ggml quantize_row_q8_0_ref, gguf.quants.Q8_0), so a
// q8 tile is bit-identical to gguf's Q8_0 encoding of the same rows and every Q8_0 kernel of the
// backends can read it:
//   amax = max |x|,  d = amax / 127 (fp32),  id = d ? 1/d : 0,
//   q = round_half_away(x * id)  (int8),  stored d = fp16(d);   x^ = fp16(d) * q
// As in ggml, a block with max |x| above 65504 * 127 (~8.3e6) gets an Inf scale; KV activations
// are far below that (BF16 keys of that size would already have broken the model).
//
// ---- Tile: 16 tokens x T channels (T a multiple of 32) ----------------------------------------
//   block_q8_0 [16][T/32]: token t, channels 32g .. 32g+31 in block t*(T/32) + g
//   each block: | d fp16 (2 B) | qs int8[32] |  = 34 B;  tile = 17T bytes (2176 for T = 128)
#pragma once
#include "../../common/half.h"
#include "../../common/portable.h"
#include "../../quant/blocks.h"

namespace gaacrt {

constexpr int32_t Q8_TILE_TOKENS = 16;
constexpr int32_t Q8_GROUP = 32;
GAACRT_STATIC_ASSERT(Q8_GROUP == QK8_0, "q8 cache groups are Q8_0 blocks");

GAACRT_HD bool q8_tile_dim_ok(int32_t T) { return T >= Q8_GROUP && T % Q8_GROUP == 0; }
GAACRT_HD uint32_t q8_slot_bytes(int32_t T) { return (uint32_t)Q8_TILE_TOKENS * (uint32_t)(T / Q8_GROUP) * 34u; }
GAACRT_HD uint32_t q8_block_offset(int32_t T, int32_t t, int32_t g) { return 34u * (uint32_t)(t * (T / Q8_GROUP) + g); }

// round(x), ties away from zero, for |x| < 2^31: truncate, then step away when the dropped
// fraction is >= 1/2 (x - trunc(x) is exact). Avoids the x + 0.5 trap at 0.49999997.
GAACRT_HD int32_t q8_round_away(float x) {
  const int32_t r = (int32_t)x;  // truncates toward zero
  const float frac = x - (float)r;
  if (frac >= 0.5f) return r + 1;
  if (frac <= -0.5f) return r - 1;
  return r;
}

// Quantize 32 values (x points at a token's group) into one block.
GAACRT_HD block_q8_0 q8_quantize_group(const GAACRT_THREAD float* x) {
  float amax = 0.0f;
  for (int32_t i = 0; i < Q8_GROUP; ++i) {
    const float a = x[i] < 0.0f ? -x[i] : x[i];
    if (a > amax) amax = a;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  block_q8_0 b;
  b.d = f32_to_fp16(d);
  for (int32_t i = 0; i < Q8_GROUP; ++i) {
    float v = x[i] * id;
    if (!(v >= -127.5f && v <= 127.5f)) v = 0.0f;  // only for Inf/NaN input: no undefined cast
    b.qs[i] = (int8_t)q8_round_away(v);
  }
  return b;
}

// Scale of block (t, g) and one of its values, read from a slot.
GAACRT_HD float q8_scale(const GAACRT_DEVICE uint8_t* slot, int32_t T, int32_t t, int32_t g) {
  const GAACRT_DEVICE uint8_t* p = slot + q8_block_offset(T, t, g);
  return fp16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}
GAACRT_HD int32_t q8_qs(const GAACRT_DEVICE uint8_t* slot, int32_t T, int32_t t, int32_t c) {
  return (int32_t)(int8_t)slot[q8_block_offset(T, t, c / Q8_GROUP) + 2u + (uint32_t)(c % Q8_GROUP)];
}

}  // namespace gaacrt
