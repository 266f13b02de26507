// kv_codec_bytes.h — slot sizes and bytes per token-head of the fixed-size cache formats: bf16,
// q8, kivi2 and E8 k2v2 (host C++; the layouts are in q8_tile.h, asym2.h and e8/e8_layout.h).
//
// One slot holds one tile: 16 tokens x tile_dim channels of K or V for one (layer, kv-head,
// 128-channel half). Bytes per token-head are the compressed steady state, summed over halves:
//   (n_half_k * slot(T_k, K) + n_half_v * slot(T_v, V)) / 16
// and exclude the BF16 residual window (kv_stats adds the tokens it actually holds raw).
//   d = 128:  bf16 512,  q8 272,  kivi2 112,  e8 84  (spec/e8.md §9)
#pragma once
#include <cstdint>

#include "kv/kv_view.h"

namespace gaacrt {

// Bytes of one compressed tile; throws Error("kv", "bad_tile_dim") when the format cannot hold
// tile_dim, Error("kv", "unsupported_format") for formats without fixed slots (gaac, fp8+gaac).
uint64_t kv_codec_slot_bytes(KVFormat f, int32_t tile_dim, bool is_v);

struct KVTokenHeadBytes {
  double k, v;        // per token-head, compressed
  double total() const { return k + v; }
};
KVTokenHeadBytes kv_codec_bytes_per_token_head(KVFormat f, int32_t head_dim_k, int32_t head_dim_v);

}  // namespace gaacrt
