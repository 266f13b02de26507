// kv_parity.cpp — the Metal KV kernels under the emulation against the CPU backend on identical
// caches (tests/test_metal_kv.py builds it against the installed libgaacrt and runs it):
//   - kv_store: the same BF16 pages;
//   - kv_finalize for q8, KIVI-2 and E8 (E8 keys: rotation, norm and nearest-codeword search on the
//     GPU path): slots byte-identical to the CPU encoders', the same `fits` answers;
//   - attention over the compressed cache (compressed blocks, the raw tail, GQA, a few queries):
//     within 1e-5 of the CPU.
// Head dims 64, 128 and 256 (two 128-channel tiles per head). Prints "N passed, M failed".
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_format.h"
#include "kv/kv_view.h"
#include "model/config.h"
#include "kv/kv_cache.h"

using namespace gaacrt;

namespace {

int passed = 0, failed = 0;
void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  (ok ? passed : failed)++;
}

constexpr int32_t kHeads = 2, kQHeads = 6, kFull = 4, kTokens = kFull * KV_BLOCK_TOKENS + 7;

struct Result {
  std::vector<uint8_t> arena;
  std::vector<int32_t> fits;
  std::vector<float> out;
};

// One layer, kHeads kv-heads: pages for every tile of kFull + 1 blocks in the first chunks, K slots
// in the next chunk, V slots in the one after.
Result run(const std::string& backend, KVFormat f, int32_t d, const std::vector<float>& k, const std::vector<float>& v,
           const std::vector<float>& q, int32_t n_q) {
  std::unique_ptr<Backend> be = create_backend(backend, 0, 1);
  ModelConfig cfg;
  cfg.n_layer = 1;
  cfg.n_head = kQHeads;
  cfg.n_head_kv = kHeads;
  cfg.head_dim_k = cfg.head_dim_v = d;
  KVCacheParams params;
  params.format = f;
  std::unique_ptr<KVCodec> codec = make_codec(f, cfg, *be, params);
  KVLayerView kv{};
  kv.format = f;
  kv.n_head_kv = kHeads;
  kv.head_dim_k = kv.head_dim_v = d;
  kv.tile_dim = d < KV_TILE_MAX_DIM ? d : KV_TILE_MAX_DIM;
  kv.n_half = d / kv.tile_dim;
  kv.max_blocks = kFull + 1;
  kv.page_bytes = (uint64_t)KV_BLOCK_TOKENS * kv.tile_dim * 2;
  kv.chunk_bytes = KV_CHUNK_PAGES * kv.page_bytes;
  kv.slot_bytes[0] = codec->slot_bytes(kv.tile_dim, false);
  kv.slot_bytes[1] = codec->slot_bytes(kv.tile_dim, true);
  kv.codec = codec->layer_state(0);
  const int32_t n_entries = kHeads * 2 * kv.n_half * kv.max_blocks;
  const uint32_t page_chunks = (uint32_t)((n_entries + KV_CHUNK_PAGES - 1) / KV_CHUNK_PAGES);
  const size_t arena_bytes = (page_chunks + 2) * kv.chunk_bytes;
  kv.arena = static_cast<uint8_t*>(be->alloc(arena_bytes));
  std::vector<uint8_t> zero(arena_bytes, 0);
  be->upload(kv.arena, zero.data(), arena_bytes);
  std::vector<uint32_t> table(n_entries);
  for (int32_t i = 0; i < n_entries; ++i) table[i] = (uint32_t)(n_entries - 1 - i);  // pages in reverse
  // kv_store of every token.
  std::vector<KVTokenSlot> slots(kTokens);
  for (int32_t t = 0; t < kTokens; ++t) slots[t] = {table.data(), t};
  auto dev = [&](const void* src, size_t n) {
    void* p = be->alloc(n);
    be->upload(p, src, n);
    return p;
  };
  void* dslots = dev(slots.data(), slots.size() * sizeof(KVTokenSlot));
  float* dk = static_cast<float*>(dev(k.data(), k.size() * 4));
  float* dv = static_cast<float*>(dev(v.data(), v.size() * 4));
  be->kv_store(kv, static_cast<const KVTokenSlot*>(dslots), kTokens, dk, dv);
  // Finalize the full blocks into slots.
  std::vector<KVFinalizeJob> jobs;
  uint32_t next[2] = {0, 0};
  for (int32_t b = 0; b < kFull; ++b)
    for (int32_t h = 0; h < kHeads; ++h)
      for (int32_t is_v = 0; is_v < 2; ++is_v)
        for (int32_t half = 0; half < kv.n_half; ++half) {
          KVFinalizeJob j{};
          j.head = h, j.is_v = is_v, j.half = half, j.block = b;
          j.raw_page = table[kv_entry_index(kv, h, is_v, half, b)];
          j.slot = KV_ENTRY_SLOT | ((page_chunks + (uint32_t)is_v) << KV_SLOT_SUB_BITS) | next[is_v]++;
          jobs.push_back(j);
        }
  std::vector<KVFinalizeJob> jobs_in = jobs;
  be->kv_finalize(kv, jobs.data(), (int64_t)jobs.size());
  Result r;
  for (const KVFinalizeJob& j : jobs) {
    r.fits.push_back(j.fits);
    if (j.fits) table[kv_entry_index(kv, j.head, j.is_v, j.half, j.block)] = j.slot;
  }
  // Attention for the last n_q positions.
  const AttnSeq seq{table.data(), 0, n_q, kTokens - n_q};
  void* dseq = dev(&seq, sizeof seq);
  float* dq = static_cast<float*>(dev(q.data(), q.size() * 4));
  float* dout = static_cast<float*>(be->alloc((size_t)n_q * kQHeads * d * 4));
  const AttentionArgs args{kQHeads, 1.0f / std::sqrt((float)d), 0, 0.f};
  be->attention(kv, args, static_cast<const AttnSeq*>(dseq), 1, dq, dout);
  r.out.resize((size_t)n_q * kQHeads * d);
  be->download(r.out.data(), dout, r.out.size() * 4);
  r.arena.resize(arena_bytes);
  be->download(r.arena.data(), kv.arena, arena_bytes);
  for (void* p : {dslots, (void*)dk, (void*)dv, dseq, (void*)dq, (void*)dout, (void*)kv.arena}) be->free(p);
  return r;
}

}  // namespace

int main() {
  const struct { KVFormat f; const char* name; } formats[] = {{KVFormat::Q8, "q8"}, {KVFormat::KIVI2, "kivi2"},
                                                              {KVFormat::E8, "e8"}};
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.f, 1.f);
  for (int32_t d : {64, 128, 256})
    for (const auto& fm : formats) {
      const int32_t n_q = d == 128 ? 3 : 1;
      std::vector<float> k((size_t)kTokens * kHeads * d), v(k.size()), q((size_t)n_q * kQHeads * d);
      for (float& x : k) x = g(rng) * 2.f;
      for (float& x : v) x = g(rng);
      for (float& x : q) x = g(rng);
      const Result a = run("cpu", fm.f, d, k, v, q, n_q), b = run("metal-emulated", fm.f, d, k, v, q, n_q);
      const std::string tag = std::string(fm.name) + " d=" + std::to_string(d);
      int n_fit = 0;
      for (int32_t x : a.fits) n_fit += x;
      check(a.fits == b.fits && n_fit == (int)a.fits.size(), tag + ": every full tile finalized on both (" +
                                                                 std::to_string(n_fit) + " tiles)");
      size_t first_diff = a.arena.size();
      for (size_t i = 0; i < a.arena.size(); ++i)
        if (a.arena[i] != b.arena[i]) { first_diff = i; break; }
      check(first_diff == a.arena.size(), tag + ": pages and slots byte-identical to the CPU's" +
                                              (first_diff < a.arena.size() ? " (first difference at byte " +
                                                                                 std::to_string(first_diff) + ")" : ""));
      double num = 0, den = 0;
      for (size_t i = 0; i < a.out.size(); ++i) {
        num += (double)(a.out[i] - b.out[i]) * (a.out[i] - b.out[i]);
        den += (double)a.out[i] * a.out[i];
      }
      const double rel = std::sqrt(num / den);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2e", rel);
      check(rel < 1e-5, tag + ": attention over the compressed cache matches the CPU (rel " + buf + ")");
    }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
