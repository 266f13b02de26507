// kv_store.cpp — append this step's K and V (fp32, keys after RoPE) to their raw BF16 pages.
#include "codec/gaac/gaac_format.h"
#include "codec/gaac/gaac_fp8_format.h"
#include "common/half.h"
#include "kv/gaac_codec.h"
#include "ops.h"

namespace gaacrt::cpu {

void kv_store(const KVLayerView& kv, const KVTokenSlot* slots, int64_t n_tok, const float* k, const float* v,
              ThreadPool& pool) {
  const int64_t dk = kv.head_dim_k, dv = kv.head_dim_v;
  // FP8 + GAAC: once calibrated, every value is rounded through FP8 with its head's power-of-two
  // scale; the result is exact in BF16 (gaac_codec.h).
  const GaacKVLayer* fp8 = nullptr;
  if ((kv.format == KVFormat::FP8_E4M3_GAAC || kv.format == KVFormat::FP8_E5M2_GAAC) &&
      static_cast<const GaacKVLayer*>(kv.codec)->quantize)
    fp8 = static_cast<const GaacKVLayer*>(kv.codec);
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int32_t pos = slots[t].pos, block = pos / KV_BLOCK_TOKENS, row = pos % KV_BLOCK_TOKENS;
      for (int32_t h = 0; h < kv.n_head_kv; ++h)
        for (int32_t is_v = 0; is_v < 2; ++is_v) {
          const float* src = is_v ? v + (t * kv.n_head_kv + h) * dv : k + (t * kv.n_head_kv + h) * dk;
          for (int32_t half = 0; half < kv.n_half; ++half) {
            const uint32_t e = slots[t].table[kv_entry_index(kv, h, is_v, half, block)];
            uint16_t* dst = reinterpret_cast<uint16_t*>(kv.arena + (uint64_t)e * kv.page_bytes) + row * kv.tile_dim;
            if (!fp8) {
              for (int32_t c = 0; c < kv.tile_dim; ++c) dst[c] = f32_to_bf16(src[half * kv.tile_dim + c]);
            } else {
              const int32_t kind = gaac_kv_fp8_kind(*fp8);
              const float s = fp8->scales[is_v][h];
              for (int32_t c = 0; c < kv.tile_dim; ++c)
                dst[c] = f32_to_bf16(gaac_fp8_to_f32(kind, gaac_fp8_from_f32(kind, src[half * kv.tile_dim + c] / s)) * s);
            }
          }
        }
    }
  };
  if (n_tok < 8) body(0, n_tok);
  else pool.parallel_for(n_tok, body);
}

// Encodes each job's raw tile into its reserved slot with the format's encoder.
void kv_finalize(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs, ThreadPool& pool) {
  if (kv_format_is_lossy(kv.format)) return kv_finalize_lossy(kv, jobs, n_jobs, pool);
  if (kv.format != KVFormat::GAAC && kv.format != KVFormat::FP8_E4M3_GAAC && kv.format != KVFormat::FP8_E5M2_GAAC) {
    for (int64_t i = 0; i < n_jobs; ++i) jobs[i].fits = 0;  // no compressed class (BF16)
    return;
  }
  const GaacKVLayer& st = *static_cast<const GaacKVLayer*>(kv.codec);
  const int32_t d = kv.tile_dim;
  pool.parallel_for(n_jobs, [&](int64_t j0, int64_t j1) {
    uint8_t fp8[KV_BLOCK_TOKENS * KV_TILE_MAX_DIM];
    for (int64_t i = j0; i < j1; ++i) {
      KVFinalizeJob& j = jobs[i];
      const uint16_t* raw = reinterpret_cast<const uint16_t*>(kv.arena + (uint64_t)j.raw_page * kv.page_bytes);
      const int64_t off = (int64_t)j.head * (j.is_v ? kv.head_dim_v : kv.head_dim_k) + (int64_t)j.half * d;
      const uint8_t* b0 = st.bases[j.is_v][0] + off;
      const uint8_t* b1 = st.bases[j.is_v][1] + off;
      uint8_t* slot = kv_entry_ptr(kv, j.slot, j.is_v);
      int32_t r;
      if (st.element == 0) {
        r = gaac_encode_tile(raw, d, d, b0, b1, st.capacity[j.is_v], slot);
      } else {
        // The raw page holds FP8 values in BF16 (kv_store): recover their FP8 bits exactly.
        const int32_t kind = gaac_kv_fp8_kind(st);
        const float s = st.scales[j.is_v][j.head];
        for (int32_t e = 0; e < KV_BLOCK_TOKENS * d; ++e) fp8[e] = (uint8_t)gaac_fp8_from_f32(kind, bf16_to_f32(raw[e]) / s);
        r = gaac_fp8_encode_tile(kind, fp8, d, d, b0, b1, st.capacity[j.is_v], slot);
      }
      j.fits = r >= 0;
      j.escape_bytes = r >= 0 ? r : 0;
    }
  });
}

}  // namespace gaacrt::cpu
