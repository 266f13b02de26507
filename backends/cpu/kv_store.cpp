// kv_store.cpp — append this step's K and V (fp32, keys after RoPE) to their raw BF16 pages.
#include "common/half.h"
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

// BF16 has no compressed class: nothing to finalize. Compressed formats (GAAC, E8) encode here.
void kv_finalize(const KVLayerView&, KVFinalizeJob* jobs, int64_t n_jobs, ThreadPool&) {
  for (int64_t i = 0; i < n_jobs; ++i) jobs[i].fits = 0;
}

}  // namespace gaacrt::cpu
