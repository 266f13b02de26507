// kv_codec_bytes.cpp — slot sizes and per-token accounting of the fixed-size formats.
#include "kv_codec_bytes.h"

#include "asym2.h"
#include "codec/e8/e8_layout.h"
#include "common/error.h"
#include "q8_tile.h"

namespace gaacrt {

namespace {
const char* fmt_name(KVFormat f) {
  switch (f) {
    case KVFormat::BF16: return "bf16";
    case KVFormat::Q8: return "q8";
    case KVFormat::KIVI2: return "kivi2";
    case KVFormat::E8: return "e8";
    default: return "gaac/fp8";
  }
}
int32_t tile_dim_of(int32_t d) { return d < KV_TILE_MAX_DIM ? d : KV_TILE_MAX_DIM; }
}  // namespace

uint64_t kv_codec_slot_bytes(KVFormat f, int32_t T, bool is_v) {
  bool ok = false;
  uint64_t bytes = 0;
  switch (f) {
    case KVFormat::BF16: ok = T >= 1 && T <= KV_TILE_MAX_DIM; bytes = 2ull * KV_BLOCK_TOKENS * (uint64_t)T; break;
    case KVFormat::Q8: ok = q8_tile_dim_ok(T) && T <= KV_TILE_MAX_DIM; bytes = q8_slot_bytes(T); break;
    case KVFormat::KIVI2:
      ok = v2_tile_dim_ok(T) && T <= KV_TILE_MAX_DIM;
      bytes = is_v ? v2_slot_bytes(T) : kivi2_k_slot_bytes(T);
      break;
    case KVFormat::E8:
      ok = e8_head_dim_ok(T) && T <= KV_TILE_MAX_DIM;
      bytes = is_v ? e8_v_slot_bytes(T) : e8_k_slot_bytes(T);
      break;
    default:
      throw Error("kv", "unsupported_format",
                  strfmt("kv_codec_slot_bytes: format %d has no fixed-size slots", (int)f));
  }
  if (!ok)
    throw Error("kv", "bad_tile_dim", strfmt("kv_codec_slot_bytes: %s cannot store tile_dim %d", fmt_name(f), T));
  return bytes;
}

KVTokenHeadBytes kv_codec_bytes_per_token_head(KVFormat f, int32_t dk, int32_t dv) {
  const int32_t tk = tile_dim_of(dk), tv = tile_dim_of(dv);
  if (dk <= 0 || dv <= 0 || dk % tk != 0 || dv % tv != 0)
    throw Error("kv", "bad_head_dim", strfmt("kv_codec_bytes_per_token_head: head dims %d / %d do not split into "
                                             "tiles of at most %d", dk, dv, KV_TILE_MAX_DIM));
  KVTokenHeadBytes b;
  b.k = (double)(dk / tk) * (double)kv_codec_slot_bytes(f, tk, false) / KV_BLOCK_TOKENS;
  b.v = (double)(dv / tv) * (double)kv_codec_slot_bytes(f, tv, true) / KV_BLOCK_TOKENS;
  return b;
}

}  // namespace gaacrt
