// kv_plan.cpp — buffer plans of the KV cache ops (metal_plan.h): kv_store, and kv_finalize for
// GAAC (the portable encoder, one thread per tile) and the lossy formats (q8, KIVI-2, 2-bit values
// one thread per tile; E8 keys per (head, block) group and token, as backends/cpu groups them).
#include <map>

#include "common/error.h"
#include "kv/gaac_codec.h"
#include "kv/lossy_codecs.h"
#include "metal_plan.h"

namespace gaacrt::mtl {

uint32_t div_up(int64_t a, int64_t b) { return (uint32_t)((a + b - 1) / b); }

uint32_t checked_u32(const char* op, const char* what, int64_t v) {
  if (v < 0 || v > 0xFFFFFFFFll)
    throw Error("backend", "invalid_argument", strfmt("metal %s: %s = %lld out of range", op, what, (long long)v));
  return (uint32_t)v;
}

uint32_t StagedTables::add(const uint32_t* table, int64_t n_entries) {
  for (size_t i = 0; i < seen.size(); ++i)
    if (seen[i] == table) return (uint32_t)(i * n_entries);
  seen.push_back(table);
  const uint32_t off = (uint32_t)entries.size();
  entries.insert(entries.end(), table, table + n_entries);
  return off;
}

Dispatch plan_kv_store(const KVLayerView& kv, const KVTokenSlot* slots, int64_t n_tok, const float* k, const float* v) {
  const int64_t per_table = (int64_t)kv.n_head_kv * 2 * kv.n_half * kv.max_blocks;
  StagedTables tables;
  std::vector<KVTokenRef> refs((size_t)n_tok);
  for (int64_t t = 0; t < n_tok; ++t) refs[t] = {tables.add(slots[t].table, per_table), slots[t].pos};
  KVStoreArgs a{};
  a.n_tok = checked_u32("kv_store", "n_tok", n_tok);
  a.n_head_kv = (uint32_t)kv.n_head_kv;
  a.dk = (uint32_t)kv.head_dim_k;
  a.dv = (uint32_t)kv.head_dim_v;
  a.tile_dim = (uint32_t)kv.tile_dim;
  a.n_half = (uint32_t)kv.n_half;
  a.max_blocks = (uint32_t)kv.max_blocks;
  a.page_bytes = kv.page_bytes;
  Dispatch d;
  d.kernel = "kv_store_f32";
  d.grid[0] = a.n_head_kv;
  d.grid[1] = a.n_tok;
  d.threads = div_up(std::max(kv.head_dim_k, kv.head_dim_v), SIMD_WIDTH) * SIMD_WIDTH;
  d.buffers = {BufferArg::stage_one(a), BufferArg::stage(refs.data(), refs.size()),
               BufferArg::stage(tables.entries.data(), tables.entries.size()),
               BufferArg::device(k, (size_t)(n_tok * kv.n_head_kv * kv.head_dim_k) * 4),
               BufferArg::device(v, (size_t)(n_tok * kv.n_head_kv * kv.head_dim_v) * 4),
               BufferArg::device(kv.arena, 0)};
  return d;
}

Dispatch plan_kv_finalize_gaac(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs) {
  const GaacKVLayer& st = *static_cast<const GaacKVLayer*>(kv.codec);
  KVFinalizeArgs a{};
  a.n_jobs = checked_u32("kv_finalize", "n_jobs", n_jobs);
  a.tile_dim = (uint32_t)kv.tile_dim;
  a.dk = (uint32_t)kv.head_dim_k;
  a.dv = (uint32_t)kv.head_dim_v;
  a.n_half = (uint32_t)kv.n_half;
  a.max_blocks = (uint32_t)kv.max_blocks;
  a.capacity[0] = st.capacity[0];
  a.capacity[1] = st.capacity[1];
  a.page_bytes = kv.page_bytes;
  a.chunk_bytes = kv.chunk_bytes;
  a.slot_bytes[0] = kv.slot_bytes[0];
  a.slot_bytes[1] = kv.slot_bytes[1];
  const size_t kb = (size_t)kv.n_head_kv * kv.head_dim_k, vb = (size_t)kv.n_head_kv * kv.head_dim_v;
  Dispatch d;
  d.kernel = "kv_finalize_gaac";
  d.grid[0] = div_up(n_jobs, FINALIZE_THREADS);
  d.threads = FINALIZE_THREADS;
  d.buffers = {BufferArg::stage_one(a), BufferArg::stage(jobs, (size_t)n_jobs, jobs), BufferArg::device(kv.arena, 0),
               BufferArg::device(st.bases[0][0], kb), BufferArg::device(st.bases[0][1], kb),
               BufferArg::device(st.bases[1][0], vb), BufferArg::device(st.bases[1][1], vb)};
  return d;
}

bool kv_format_has_metal_finalize(KVFormat f) {
  return f == KVFormat::GAAC || f == KVFormat::Q8 || f == KVFormat::KIVI2 || f == KVFormat::E8;
}

namespace {

KVFinalizeArgs finalize_args(const KVLayerView& kv, int64_t n_jobs) {
  KVFinalizeArgs a{};
  a.n_jobs = checked_u32("kv_finalize", "n_jobs", n_jobs);
  a.tile_dim = (uint32_t)kv.tile_dim;
  a.dk = (uint32_t)kv.head_dim_k;
  a.dv = (uint32_t)kv.head_dim_v;
  a.n_half = (uint32_t)kv.n_half;
  a.max_blocks = (uint32_t)kv.max_blocks;
  a.format = (uint32_t)kv.format;
  a.page_bytes = kv.page_bytes;
  a.chunk_bytes = kv.chunk_bytes;
  a.slot_bytes[0] = kv.slot_bytes[0];
  a.slot_bytes[1] = kv.slot_bytes[1];
  return a;
}

}  // namespace

std::vector<Dispatch> plan_kv_finalize_lossy(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs) {
  if (kv.format != KVFormat::Q8 && kv.format != KVFormat::KIVI2 && kv.format != KVFormat::E8)
    throw Error("kv", "unsupported_format", strfmt("metal kv_finalize: format %d is not a lossy slot format", (int)kv.format));
  if (kv.tile_dim % 32 || (kv.format == KVFormat::E8 && kv.head_dim_k > (int32_t)ATTN_MAX_DIM))
    throw Error("kv", "bad_tile_dim", strfmt("metal kv_finalize: tile_dim %d, head dim %d", kv.tile_dim, kv.head_dim_k));
  KVFinalizeArgs a = finalize_args(kv, n_jobs);
  // The staged jobs the scalar kernel fills in and the host reads back. E8 key jobs are answered
  // here: fits exactly when their (head, block) group is complete (the second dispatch encodes it).
  std::vector<KVFinalizeJob> staged(jobs, jobs + n_jobs);
  std::vector<E8KeyGroup> groups;
  if (kv.format == KVFormat::E8) {
    std::map<std::pair<int32_t, int32_t>, std::vector<uint32_t>> by_block;
    for (int64_t i = 0; i < n_jobs; ++i)
      if (!jobs[i].is_v) {
        staged[i].fits = 0;
        staged[i].escape_bytes = 0;
        by_block[{jobs[i].head, jobs[i].block}].push_back((uint32_t)i);
      }
    for (auto& [key, idx] : by_block) {
      if ((int32_t)idx.size() != kv.n_half) continue;
      E8KeyGroup g{{0, 0}};
      for (uint32_t i : idx) {
        g.job[jobs[i].half] = i;
        staged[i].fits = 1;
      }
      groups.push_back(g);
    }
    const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
    if (st.mean || st.block_mean)
      throw Error("kv", "unsupported_format",
                  "metal kv_finalize: E8 key centering (e8_center=global or block) is not implemented on Metal");
    a.alpha = st.alpha;
    a.n_groups = (uint32_t)groups.size();
  }
  std::vector<Dispatch> out;
  Dispatch d;
  d.kernel = "kv_finalize_scalar";
  d.grid[0] = div_up(n_jobs, FINALIZE_THREADS);
  d.threads = FINALIZE_THREADS;
  d.buffers = {BufferArg::stage_one(a), BufferArg::stage(staged.data(), staged.size(), jobs),
               BufferArg::device(kv.arena, 0)};
  out.push_back(std::move(d));
  if (!groups.empty()) {
    const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
    Dispatch e;
    e.kernel = "kv_finalize_e8_keys";
    e.grid[0] = div_up((int64_t)groups.size() * KV_BLOCK_TOKENS, FINALIZE_THREADS);
    e.threads = FINALIZE_THREADS;
    e.buffers = {BufferArg::stage_one(a), BufferArg::stage(staged.data(), staged.size()), BufferArg::device(kv.arena, 0),
                 BufferArg::stage(groups.data(), groups.size()),
                 BufferArg::device(st.rot, (size_t)kv.head_dim_k * kv.head_dim_k * 4)};
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace gaacrt::mtl
