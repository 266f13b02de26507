// e8_layout.h — how E8 k2v2 lays a 16-token block of one (layer, kv-head) into the cache's
// slots, and its byte accounting (portable: C++, CUDA and MSL include this file).
//
// Follows shared/spec/e8.md §2 (quads), §5 (norm, codes), §8 (values) and §9 (accounting).
//
// The cache stores tiles of 16 tokens x T channels, T = min(head_dim, 128), so a 256-dim head has
// two tiles ("halves") per block for K and two for V (src/kv/kv_view.h). E8 keys are coded over
// the whole head (norm of all d dims, d x d rotation), so the key block is ENCODED as a whole by
// one call, but STORED as one self-contained slot per half: half h holds the codes of rotated
// dims [h*T, h*T + T) and its own copy of the fp32 norm. Any tile can then be scored alone:
//   score_t = (n_t / alpha) * sum over halves h of  sum_j <q~^(h, j), g(z_t,h,j)>
// The copy costs 4 B per token-head per extra half (d = 256: 72 B of key instead of the spec's
// clean 68); d <= 128 has one half and matches §9 exactly.
//
// ---- K slot: 16 tokens, T rotated dims (T a multiple of 32: Q = T/32 quads per token) ------
//   offset  bytes   content
//   0       4T      quads: uint32 [16][Q][2]; token t, quad q at 8*(t*Q + q): {proto word,
//                   sign word} of blocks 4q..4q+3 of this half (e8_codebook.h "Quads")
//   4T      64      norms: float32 [16]; n_t = |k~_t| over the whole head (same in every half)
//   total   4T + 64 (576 B for T = 128, 320 B for T = 64)
// ---- K slot with block centering (an option, not in the paper: e8_center = block) ---------
//   0       4T + 64 as above, but the codes and norms are of the residual k~ - m~
//   4T + 64 2T      block mean: fp16 [T], m~_c of rotated channel h*T + c (e8_keys.cpp says how
//                   it is fitted); bit 31 of a token's norm (E8_NORM_RAW) says the token was
//                   coded without it: an outlier, such as an attention sink, that the block mean
//                   would move further from zero
//   total   6T + 64 (832 B for T = 128: 52 B per token-head of key, 100 B with values)
//   Decoding adds m~ back to every centered token: k^~ = m~ + (|n| / alpha) g, so a score is
//   <q~, m~> (once per block and query head) + the usual lattice dot product.
// ---- V slot: the v2 tile of asym2.h (per token, groups of 32, fp16 D and z): 6T bytes
//   (768 B for T = 128). Values are not rotated; each half is independent.
//
// Bytes per token-head: K = d/4 + 4 * n_half, V = 3 d_v / 8.
//   d = 128: 36 + 48 = 84 (spec §9);  d = 64: 20 + 24 = 44;  d = 256: 72 + 96 = 168.
#pragma once
#include "../scalar/asym2.h"
#include "e8_codebook.h"

namespace gaacrt {

constexpr int32_t E8_TILE_TOKENS = 16;     // = KV_BLOCK_TOKENS (checked in e8_keys.cpp)
constexpr int32_t E8_TILE_MAX_DIM = 128;   // = KV_TILE_MAX_DIM
constexpr int32_t E8_QUAD_DIMS = E8_QUAD * E8_BLOCK;  // 32 dims per quad
// Residual window (spec §8): the newest W tokens stay BF16; a block is encoded once all 16 of its
// tokens are older than W, so W .. W+15 tokens are raw at any time. The scalar baselines (q8,
// kivi2) use the same rule.
constexpr int32_t E8_DEFAULT_WINDOW = 128;

GAACRT_HD int32_t e8_tile_dim(int32_t d) { return d < E8_TILE_MAX_DIM ? d : E8_TILE_MAX_DIM; }
GAACRT_HD int32_t e8_n_half(int32_t d) { return d / e8_tile_dim(d); }
// Head dims E8 supports: multiples of 32 up to 128, and multiples of 128 above.
GAACRT_HD bool e8_head_dim_ok(int32_t d) {
  return d >= E8_QUAD_DIMS && d <= 1024 && d % E8_QUAD_DIMS == 0 && (d <= E8_TILE_MAX_DIM || d % E8_TILE_MAX_DIM == 0);
}

GAACRT_HD uint32_t e8_k_slot_bytes(int32_t T) { return 4u * (uint32_t)T + 4u * (uint32_t)E8_TILE_TOKENS; }
GAACRT_HD uint32_t e8_v_slot_bytes(int32_t T) { return v2_slot_bytes(T); }
GAACRT_HD uint32_t e8_k_quad_offset(int32_t T, int32_t t, int32_t q) {
  return 8u * (uint32_t)(t * (T / E8_QUAD_DIMS) + q);
}
GAACRT_HD uint32_t e8_k_norm_offset(int32_t T, int32_t t) { return 4u * (uint32_t)T + 4u * (uint32_t)t; }
// Block centering: the slot grows by the fp16 block mean of its T rotated channels, and a set
// sign bit on a token's (non-negative) norm marks a token coded without the mean.
constexpr uint32_t E8_NORM_RAW = 0x80000000u;
GAACRT_HD uint32_t e8_kc_slot_bytes(int32_t T) { return e8_k_slot_bytes(T) + 2u * (uint32_t)T; }
GAACRT_HD uint32_t e8_k_mean_offset(int32_t T, int32_t c) { return e8_k_slot_bytes(T) + 2u * (uint32_t)c; }
GAACRT_STATIC_ASSERT((6 * 128 + 64) / 16 + 3 * 128 / 8 == 100, "block-centered E8 = 100 B per token-head at d = 128");
GAACRT_STATIC_ASSERT(4 * 128 + 64 == 16 * 36, "K slot = 36 B per token at T = 128 (spec §5.4)");

GAACRT_HD uint32_t e8_k_bytes_per_token_head(int32_t d) {
  return (uint32_t)(d / 4) + 4u * (uint32_t)e8_n_half(d);
}
GAACRT_HD uint32_t e8_v_bytes_per_token_head(int32_t d_v) { return 3u * (uint32_t)d_v / 8u; }
GAACRT_STATIC_ASSERT(128 / 4 + 4 + 3 * 128 / 8 == 84, "E8 k2v2 = 84 B per token-head at d = 128 (spec §9)");

// Little-endian word access on byte slots (slots are byte streams on every backend).
GAACRT_HD uint32_t e8_ld32(const GAACRT_DEVICE uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
GAACRT_HD void e8_st32(GAACRT_DEVICE uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

GAACRT_HD E8Quad e8_k_quad(const GAACRT_DEVICE uint8_t* slot, int32_t T, int32_t t, int32_t q) {
  const GAACRT_DEVICE uint8_t* p = slot + e8_k_quad_offset(T, t, q);
  E8Quad r;
  r.proto = e8_ld32(p);
  r.signs = e8_ld32(p + 4);
  return r;
}
GAACRT_HD float e8_k_norm(const GAACRT_DEVICE uint8_t* slot, int32_t T, int32_t t) {
  return bits_to_f32(e8_ld32(slot + e8_k_norm_offset(T, t)) & ~E8_NORM_RAW);
}
// Block-centered slots: whether token t was coded as k~ - m~ (the E8_NORM_RAW bit is clear).
GAACRT_HD bool e8_k_centered(const GAACRT_DEVICE uint8_t* slot, int32_t T, int32_t t) {
  return (e8_ld32(slot + e8_k_norm_offset(T, t)) & E8_NORM_RAW) == 0u;
}
// Block mean of rotated channel c of this half (block-centered slots only).
GAACRT_HD float e8_k_mean(const GAACRT_DEVICE uint8_t* slot, int32_t T, int32_t c) {
  const GAACRT_DEVICE uint8_t* p = slot + e8_k_mean_offset(T, c);
  return fp16_to_f32((uint16_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8)));
}

// <q, g> of block i of a quad against 8 query values in natural order: the packed-table word is
// looked up by the caller (shared memory on GPUs), the rest is the §3 nibble decode.
GAACRT_HD float e8_quad_block_dot(uint32_t table_word, uint32_t signs, int32_t i, E8Vec8 q) {
  uint32_t parity;
  const uint32_t sw = e8_signed_word(table_word, e8_quad_spread_flips(signs, i, &parity));
  const float shift = parity ? -0.25f : 0.25f;
  float acc = 0.0f;
  for (int32_t k = 0; k < E8_BLOCK; ++k) {
    const float g = 0.5f * (float)((int32_t)((sw >> (4 * e8_dim_nibble(k))) & 15u) - 8) + shift;
    acc += q.v[k] * g;
  }
  return acc;
}

}  // namespace gaacrt
