// scalar_codecs.h — host encode / decode / score / accumulate of the scalar cache tiles: q8
// (q8_tile.h; K and V), KIVI-2 keys and the 2-bit per-token value tile "v2" shared by KIVI-2 and
// E8 k2v2 (asym2.h). The layouts and the quantizer rules are in those portable headers.
//
// Every function works on one tile: 16 tokens x T channels (T = tile_dim). Inputs are fp32 with
// a row stride (so a 128-channel half of a 256-dim head is x + 128 with ld = 256); the cache's
// BF16 pages convert exactly to fp32. Attention reads tiles through:
//   *_score_tile:      scores[h][t] = <q_h, k^_t> for n_q query heads of this kv-head (GQA: the
//                      tile is decoded once and reused across the group)
//   *_accumulate_tile: acc[h][:] += sum_t p[h][t] * v^_t
// Bad tile dims throw Error("kv", "bad_tile_dim") naming the function and the value.
#pragma once
#include <cstdint>

namespace gaacrt {

// v2: 2-bit per token, groups of 32 channels, fp16 scale and zero (T a multiple of 32).
void v2_encode_tile(const float* x, int64_t ld, int32_t T, uint8_t* slot);
void v2_decode_tile(const uint8_t* slot, int32_t T, float* x, int64_t ld);
void v2_accumulate_tile(const uint8_t* slot, int32_t T, const float* p /* (n_q, 16) */, int32_t n_q,
                        float* acc /* (n_q, >= T), row stride acc_ld */, int64_t acc_ld);

// KIVI-2 keys: 2-bit per channel over the 16 tokens, fp16 scale and zero per channel.
void kivi2_k_encode_tile(const float* x, int64_t ld, int32_t T, uint8_t* slot);
void kivi2_k_decode_tile(const uint8_t* slot, int32_t T, float* x, int64_t ld);
void kivi2_k_score_tile(const uint8_t* slot, int32_t T, const float* q /* (n_q, >= T) */, int64_t q_ld, int32_t n_q,
                        float* scores /* (n_q, 16) */);

// q8: Q8_0 blocks per token (T a multiple of 32), for keys and values alike.
void q8_encode_tile(const float* x, int64_t ld, int32_t T, uint8_t* slot);
void q8_decode_tile(const uint8_t* slot, int32_t T, float* x, int64_t ld);
void q8_score_tile(const uint8_t* slot, int32_t T, const float* q, int64_t q_ld, int32_t n_q, float* scores);
void q8_accumulate_tile(const uint8_t* slot, int32_t T, const float* p, int32_t n_q, float* acc, int64_t acc_ld);

}  // namespace gaacrt
