// kv_store.cpp — append this step's K and V (fp32, keys after RoPE) to their raw BF16 pages.
#include "codec/gaac/gaac_format.h"
#include "common/half.h"
#include "kv/gaac_codec.h"
#include "ops.h"

namespace gaacrt::cpu {

void kv_store(const KVLayerView& kv, const KVTokenSlot* slots, int64_t n_tok, const float* k, const float* v,
              ThreadPool& pool) {
  const int64_t dk = kv.head_dim_k, dv = kv.head_dim_v;
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int32_t pos = slots[t].pos, block = pos / KV_BLOCK_TOKENS, row = pos % KV_BLOCK_TOKENS;
      for (int32_t h = 0; h < kv.n_head_kv; ++h)
        for (int32_t is_v = 0; is_v < 2; ++is_v) {
          const float* src = is_v ? v + (t * kv.n_head_kv + h) * dv : k + (t * kv.n_head_kv + h) * dk;
          for (int32_t half = 0; half < kv.n_half; ++half) {
            const uint32_t e = slots[t].table[kv_entry_index(kv, h, is_v, half, block)];
            uint16_t* dst = reinterpret_cast<uint16_t*>(kv.arena + (uint64_t)e * kv.page_bytes) + row * kv.tile_dim;
            for (int32_t c = 0; c < kv.tile_dim; ++c) dst[c] = f32_to_bf16(src[half * kv.tile_dim + c]);
          }
        }
    }
  };
  if (n_tok < 8) body(0, n_tok);
  else pool.parallel_for(n_tok, body);
}

// Encodes each job's raw tile into its reserved slot with the format's encoder.
void kv_finalize(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs, ThreadPool& pool) {
  if (kv.format != KVFormat::GAAC) {
    for (int64_t i = 0; i < n_jobs; ++i) jobs[i].fits = 0;  // no compressed class (BF16)
    return;
  }
  const GaacKVLayer& st = *static_cast<const GaacKVLayer*>(kv.codec);
  const int32_t d = kv.tile_dim;
  pool.parallel_for(n_jobs, [&](int64_t j0, int64_t j1) {
    for (int64_t i = j0; i < j1; ++i) {
      KVFinalizeJob& j = jobs[i];
      const uint16_t* raw = reinterpret_cast<const uint16_t*>(kv.arena + (uint64_t)j.raw_page * kv.page_bytes);
      const int64_t off = (int64_t)j.head * (j.is_v ? kv.head_dim_v : kv.head_dim_k) + (int64_t)j.half * d;
      const int32_t r = gaac_encode_tile(raw, d, d, st.bases[j.is_v][0] + off, st.bases[j.is_v][1] + off,
                                         st.capacity[j.is_v], kv_entry_ptr(kv, j.slot, j.is_v));
      j.fits = r >= 0;
      j.escape_bytes = r >= 0 ? r : 0;
    }
  });
}

}  // namespace gaacrt::cpu
