// kv_cache.h — the paged KV cache: one arena of 16-token pages, per-sequence block tables,
// the fill-then-finalize lifecycle and per-format accounting (DESIGN.md "KV cache").
//
// Host-side bookkeeping lives here; the bytes live in backend memory and are written and read
// only by the backend's kv_store / kv_finalize / attention ops through KVLayerView.
// A cache belongs to one model and format; several sequences share its arena (batched decode).
// Running out of pages is Error("kv", "arena_full") raised *before* anything is modified, so a
// failed step leaves every sequence as it was.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kv_format.h"
#include "kv_view.h"
#include "model/config.h"

namespace gaacrt {

struct KVCacheParams {
  KVFormat format = KVFormat::BF16;
  int32_t n_ctx = 4096;          // longest sequence allowed (positions 0 .. n_ctx-1)
  int32_t n_seq_max = 1;         // sequences sized for when budget_bytes == 0
  uint64_t budget_bytes = 0;     // arena size; 0 = enough for n_seq_max sequences of n_ctx tokens
  int32_t n_ubatch = 512;        // largest prefill chunk (sizes sliding-window layers' pages)
};

struct KVStats {
  uint64_t arena_bytes = 0;      // the whole arena
  uint64_t resident_bytes = 0;   // pages and slots in use + block-table entries
  uint64_t raw_pages_used = 0, slots_used = 0, pages_free = 0;
  uint64_t tokens = 0;           // token positions stored (all live sequences)
  uint64_t bf16_bytes = 0;       // what the same tokens would take as BF16 (windows excluded)
};

class KVCache {
 public:
  KVCache(const ModelConfig& cfg, Backend& be, const KVCacheParams& p);
  ~KVCache();
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  int new_sequence();                    // an empty sequence; returns its id
  void free_sequence(int seq);           // returns its pages to the arena
  int32_t length(int seq) const;         // tokens stored
  int32_t n_ctx() const { return params_.n_ctx; }
  const KVCacheParams& params() const { return params_; }
  const KVCodec& codec() const { return *codec_; }

  // Before a step appends n tokens to `seq`: checks the context limit and that the arena can hold
  // the new blocks, then allocates them. Throws context_full / arena_full without side effects.
  void reserve(int seq, int32_t n);
  // Pages for several sequences at once (one batched step): all or nothing.
  void reserve_batch(const std::vector<std::pair<int, int32_t>>& seq_n);
  // After the step's kv_store: the sequence is n tokens longer; full blocks are finalized
  // (compressed where the format says so) and sliding-window blocks no longer visible released.
  void commit(int seq, int32_t n);
  // Drops tokens at positions >= n. Returns false when the cache cannot represent the first n
  // tokens any more (a compressed lossy block or a released sliding-window block would be needed):
  // the caller must then clear the sequence and re-prefill from its token history.
  bool truncate(int seq, int32_t n);

  KVLayerView layer_view(int il) const;
  const uint32_t* table(int seq, int il) const;  // backend-visible block table of one layer
  KVStats stats() const;

 private:
  struct Sequence;
  struct Tile;
  int64_t table_entries_per_layer() const;
  template <typename F>
  void for_new_entries(Sequence& s, int32_t n, F&& f);
  uint32_t alloc_page();
  void release_entry(uint32_t& e);
  void sync_table(int seq);
  void finalize_ready(int seq);
  void release_out_of_window(int seq);

  const ModelConfig& cfg_;
  Backend& be_;
  KVCacheParams params_;
  std::unique_ptr<KVCodec> codec_;
  int32_t tile_dim_, n_half_;
  int32_t max_blocks_;
  uint64_t page_bytes_;
  uint64_t n_pages_ = 0;
  uint8_t* arena_ = nullptr;             // backend memory
  std::vector<uint32_t> free_pages_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
};

}  // namespace gaacrt
