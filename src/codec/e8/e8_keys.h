// e8_keys.h — host side of the E8 k2v2 cache format: per-layer state (rotation, alpha), key
// encode / decode, the two scoring paths, and values (host C++).
//
// Follows shared/spec/e8.md §5 (key pipeline), §6 (alpha), §7 (scoring) and §8 (values); the slot
// layouts are drawn in e8_layout.h. The cache integration, in the order attention meets it:
//
//   E8LayerCodec c = e8_layer_codec(head_dim, layer);         // once per layer (R, alpha)
//   finalize a block:  e8_encode_key_block(c, k, k_slots);     // k: (16, d), whole head
//                      e8_encode_value_block(d_v, v, v_slots);
//   decode step:       e8_rotate(c.rot.data(), d, q, n_q, q_rot);     // per query head
//                      e8_score_key_block(c, k_slots, q_rot, n_q, scores);   // path (B), default
//                      v2_accumulate_tile(v_slot[h], ...)             // scalar_codecs.h, per half
//   k_slots / v_slots hold e8_n_half(d) slot pointers (halves of 128 rotated / value channels).
//
// Scores are <q, k^> (the caller applies 1/sqrt(d) and the softmax). Path (A), the paper's table
// scoring, builds 65,536 entries per 8-dim block per query head and gathers from them.
#pragma once
#include <cstdint>
#include <vector>

#include "e8_rotation.h"

namespace gaacrt {

// alpha (spec §6): 12 for d = 128 (the paper's value), 1.04 sqrt(d) otherwise.
float e8_alpha(int32_t d);

struct E8LayerCodec {
  int32_t d = 0;            // head dim of K
  float alpha = 0.0f;
  std::vector<float> rot;   // (d, d) row-major: k~ = rot . k (e8_rotation.h)
  // Block centering (an option, not in the paper): each block's per-channel mean m~ (rotated basis,
  // fp16) is stored in the slot and the lattice codes k~ - m~ (e8_layout.h, e8_kc_slot_bytes).
  bool block_mean = false;
};
// With block centering alpha is e8_alpha(d) x E8_BLOCK_ALPHA_SCALE: a centered, channel-scaled
// residual is heavier-tailed than a Gaussian key, and coarser cells (fewer overloads) gave lower
// attention KL on SmolLM2 and Gemma-3 than x 1, x 0.9 and x 0.7 (bench/e8_center_probe.py).
constexpr float E8_BLOCK_ALPHA_SCALE = 0.8f;
// Throws Error("e8", "bad_head_dim") when !e8_head_dim_ok(d).
E8LayerCodec e8_layer_codec(int32_t d, int32_t layer, uint64_t seed = E8_DEFAULT_SEED, bool block_mean = false);
// Block centering of one block's rotated keys kr (16, d), in place (e8_keys.cpp has the rule):
// writes the fp16 mean m~ (d) and returns the mask of the tokens coded without it.
uint32_t e8_fit_block_mean(float* kr, int32_t d, uint16_t* mean_bits);
// Bytes of one key slot (one 128-channel half) of this codec: e8_k_slot_bytes or, with block
// centering, e8_kc_slot_bytes.
uint32_t e8_key_slot_bytes(const E8LayerCodec& c);

// ---- keys already in the rotated basis ---------------------------------------------------------
// codes: (n, d/8) 16-bit codes; norms: (n) fp32 |k~|. A zero key stores n = 0 (decodes to 0).
void e8_encode_rotated(const float* kr, int64_t n, int32_t d, float alpha, uint16_t* codes, float* norms);
void e8_decode_rotated(const uint16_t* codes, const float* norms, int64_t n, int32_t d, float alpha, float* kr_hat);

// ---- cache blocks: 16 tokens of one (layer, kv-head) ------------------------------------------
void e8_encode_key_block(const E8LayerCodec& c, const float* k /* (16, d) */, uint8_t* const* slots);
// The same from the cache's BF16 pages: pages[h] is half h, (16, tile_dim) bf16.
void e8_encode_key_block_bf16(const E8LayerCodec& c, const uint16_t* const* pages, uint8_t* const* slots);
// k^ = R^T (m~ + (n / alpha) g), in the original basis (m~ = 0 without block centering).
void e8_decode_key_block(const E8LayerCodec& c, const uint8_t* const* slots, float* k_hat /* (16, d) */);

// (B) decode-in-dot: scores[h][t] = (n_t / alpha) sum_j <q~_h^(j), g(z_tj)> (+ <q~_h, m~> on the
// tokens block centering centered). Each key is decoded once and dotted with all n_q query heads
// (GQA). On the CPU the 1 KiB packed table is expanded
// once into 8 KiB of base points and 8 KiB of sign masks (spec §3 allows it on CPUs), so a block
// is (base XOR mask) + shift in SIMD lanes; GPU kernels use the 1 KiB form of e8_codebook.h.
void e8_score_key_block(const E8LayerCodec& c, const uint8_t* const* slots, const float* q_rot /* (n_q, d) */,
                        int32_t n_q, float* scores /* (n_q, 16) */);

// (A) the paper's table scoring: tables[j][i] = <q~^(j), g_i> for all 65,536 codes i, (d/8, 65536)
// fp32 per query head (4 MiB at d = 128), then one gather per block. The tables hold only the
// lattice part: with block centering q_mean = e8_block_mean_dot(c, slots, q~) is added to the
// centered tokens (pass 0 otherwise).
void e8_build_query_tables(const float* q_rot, int32_t d, float* tables);
void e8_score_key_block_table(const E8LayerCodec& c, const uint8_t* const* slots, const float* tables, float q_mean,
                              float* scores /* (16) */);
// <q~, m~> of a block-centered key block (0 when c.block_mean is off).
float e8_block_mean_dot(const E8LayerCodec& c, const uint8_t* const* slots, const float* q_rot /* (d) */);

// ---- values: the v2 tile per half (asym2.h), not rotated --------------------------------------
void e8_encode_value_block(int32_t d_v, const float* v /* (16, d_v) */, uint8_t* const* slots);
void e8_encode_value_block_bf16(int32_t d_v, const uint16_t* const* pages, uint8_t* const* slots);
void e8_decode_value_block(int32_t d_v, const uint8_t* const* slots, float* v_hat /* (16, d_v) */);

}  // namespace gaacrt
