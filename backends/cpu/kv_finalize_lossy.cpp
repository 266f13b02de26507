// kv_finalize_lossy.cpp — finalize for the fixed-slot lossy formats (E8 k2v2, q8, kivi2): each
// job's raw BF16 tile is encoded into its slot by the portable/host codecs of src/codec/e8 and
// src/codec/scalar. E8 keys are encoded a whole head at a time (norm and rotation span every
// 128-channel half), so the halves of a (head, block) go together or not at all.
#include <algorithm>
#include <map>
#include <vector>

#include "codec/e8/e8_codebook.h"
#include "codec/e8/e8_keys.h"
#include "codec/e8/e8_layout.h"
#include "codec/scalar/scalar_codecs.h"
#include "common/half.h"
#include "kv/lossy_codecs.h"
#include "ops.h"

namespace gaacrt::cpu {

void kv_finalize_lossy(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs, ThreadPool& pool) {
  const int32_t T = kv.tile_dim;
  // E8 keys: the jobs of one (head, block) form a group; it is encoded when every half is present.
  std::vector<int64_t> leader(n_jobs, -1);   // job index that encodes this job's group, or -1
  if (kv.format == KVFormat::E8) {
    std::map<std::pair<int32_t, int32_t>, std::vector<int64_t>> groups;
    for (int64_t i = 0; i < n_jobs; ++i)
      if (!jobs[i].is_v) groups[{jobs[i].head, jobs[i].block}].push_back(i);
    for (auto& [key, idx] : groups)
      if ((int32_t)idx.size() == kv.n_half)
        for (int64_t i : idx) leader[i] = idx[0];
  }
  pool.parallel_for(n_jobs, [&](int64_t j0, int64_t j1) {
    std::vector<float> x((size_t)KV_BLOCK_TOKENS * T);
    for (int64_t i = j0; i < j1; ++i) {
      KVFinalizeJob& j = jobs[i];
      const uint16_t* raw = reinterpret_cast<const uint16_t*>(kv.arena + (uint64_t)j.raw_page * kv.page_bytes);
      uint8_t* slot = kv_entry_ptr(kv, j.slot, j.is_v);
      j.escape_bytes = 0;
      if (kv.format == KVFormat::E8 && !j.is_v) {
        j.fits = leader[i] >= 0;
        if (leader[i] != i) continue;  // a later half (encoded by its leader), or an incomplete group
        const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
        const uint16_t* pages[2] = {nullptr, nullptr};
        uint8_t* slots[2] = {nullptr, nullptr};
        for (int64_t k = 0; k < n_jobs; ++k)
          if (leader[k] == i) {
            pages[jobs[k].half] = reinterpret_cast<const uint16_t*>(kv.arena + (uint64_t)jobs[k].raw_page * kv.page_bytes);
            slots[jobs[k].half] = kv_entry_ptr(kv, jobs[k].slot, 0);
          }
        if (!st.mean) {
          e8_encode_key_block_bf16(*st.host, pages, slots);
        } else {  // centering: the residual k - mean is what the lattice codes
          const int32_t d = kv.head_dim_k;
          std::vector<float> kc((size_t)KV_BLOCK_TOKENS * d);
          const float* mu = st.mean + (size_t)j.head * d;
          const float* sc = st.scale + (size_t)j.head * d;
          for (int32_t h = 0; h < kv.n_half; ++h)
            for (int32_t t = 0; t < KV_BLOCK_TOKENS; ++t)
              for (int32_t c = 0; c < T; ++c)
                kc[(size_t)t * d + h * T + c] = (bf16_to_f32(pages[h][t * T + c]) - mu[h * T + c]) / sc[h * T + c];
          e8_encode_key_block(*st.host, kc.data(), slots);
        }
        continue;
      }
      for (int32_t e = 0; e < KV_BLOCK_TOKENS * T; ++e) x[e] = bf16_to_f32(raw[e]);
      if (kv.format == KVFormat::Q8) q8_encode_tile(x.data(), T, T, slot);
      else if (kv.format == KVFormat::KIVI2 && !j.is_v) kivi2_k_encode_tile(x.data(), T, T, slot);
      else v2_encode_tile(x.data(), T, T, slot);  // E8 and KIVI values: 2-bit per token, groups of 32
      j.fits = 1;
    }
  });
}

// Decodes one lossy slot into out[r * ld + c] (16 rows x tile_dim). E8 keys come out in the
// layer's rotated basis (k~ = R k): the caller scores them against rotated queries.
void decode_lossy_tile(const KVLayerView& kv, const uint8_t* slot, int32_t is_v, int32_t head, int32_t half, float* out,
                       int64_t ld) {
  const int32_t T = kv.tile_dim;
  if (kv.format == KVFormat::Q8) return q8_decode_tile(slot, T, out, ld);
  if (is_v) return v2_decode_tile(slot, T, out, ld);
  if (kv.format == KVFormat::KIVI2) return kivi2_k_decode_tile(slot, T, out, ld);
  // E8 key tile: per token, T/32 quads of 4 codes; value = codeword * norm / alpha.
  const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
  const float* mu = st.mean_rot ? st.mean_rot + (size_t)head * kv.head_dim_k + (size_t)half * T : nullptr;
  for (int32_t t = 0; t < KV_BLOCK_TOKENS; ++t) {
    const float s = e8_k_norm(slot, T, t) / st.alpha;
    for (int32_t q = 0; q < T / E8_QUAD_DIMS; ++q) {
      const E8Quad quad = e8_k_quad(slot, T, t, q);
      for (int32_t i = 0; i < E8_QUAD; ++i) {
        const uint32_t code = e8_quad_code(quad, i);
        const E8Vec8 g = e8_decode_word(e8_packed_table[e8_code_proto(code)], code);
        for (int32_t k = 0; k < E8_BLOCK; ++k) out[t * ld + q * E8_QUAD_DIMS + i * E8_BLOCK + k] = g.v[k] * s;
      }
    }
    if (mu)
      for (int32_t c = 0; c < T; ++c) out[t * ld + c] += mu[c];
    if (st.block_mean && e8_k_centered(slot, T, t))  // block centering: the block's own mean, stored in the slot
      for (int32_t c = 0; c < T; ++c) out[t * ld + c] += e8_k_mean(slot, T, c);
  }
}

}  // namespace gaacrt::cpu
