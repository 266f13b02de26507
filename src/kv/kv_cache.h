// kv_cache.h — the paged KV cache: one arena of 16-token pages and compressed slots (kv_arena.h),
// per-sequence block tables, the fill-then-finalize lifecycle and per-format accounting
// (DESIGN.md "KV cache").
//
// Host-side bookkeeping lives here; the bytes live in backend memory and are written and read
// only by the backend's kv_store / kv_finalize / attention ops through KVLayerView.
// A cache belongs to one model and format; several sequences share its arena (batched decode).
// Running out of pages is Error("kv", "arena_full") raised *before* anything is modified, so a
// failed step leaves every sequence as it was. Finalization never fails: a tile that does not
// fit its slot, or finds no room for one, keeps its raw page.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kv_arena.h"
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
  std::string calibration;       // GAAC: sidecar path ("" = beside the model, else online)
  std::string model_path;        // where to look for a sidecar
  int32_t raw_window = -1;       // compressing formats: newest tokens kept raw BF16 (-1 = the format's default)
  std::string e8_scoring = "decode";  // E8: "decode" (decode-in-dot, default) or "table" (the paper's)
  E8Center e8_center = E8Center::Off;  // E8 key centering (kv_format.h; not in the paper)
  int32_t raw_sink = 0;          // lossy formats: the first tokens of a sequence kept BF16 for good (the
                                 // attention sink), rounded up to 16-token blocks; 0 = the paper's E8
  bool keep_raw = false;         // test hook: calibrate and round as usual but never compress a
                                 // tile, so a lossless format can be compared with its own values
};

struct KVStats {
  uint64_t arena_bytes = 0;      // the whole arena
  uint64_t resident_bytes = 0;   // pages and slots in use + block-table entries
  uint64_t raw_pages_used = 0, slots_used = 0, pages_free = 0;
  uint64_t tokens = 0;           // token positions stored (all live sequences)
  uint64_t bf16_bytes = 0;       // what the same tiles would take as BF16
  uint64_t tiles_raw = 0, tiles_slot = 0;  // tiles in each class (live sequences)
  CodecStats codec[2];           // per K / V: what the format measured at finalize
};

class KVCache {
 public:
  KVCache(const ModelConfig& cfg, Backend& be, const KVCacheParams& p);
  ~KVCache();
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  int new_sequence();                    // an empty sequence; returns its id
  void free_sequence(int seq);           // returns its pages and slots to the arena
  int32_t length(int seq) const;         // tokens stored
  int32_t n_ctx() const { return params_.n_ctx; }
  const KVCacheParams& params() const { return params_; }
  KVCodec& codec() { return *codec_; }

  // Before a step appends n tokens to `seq`: checks the context limit and that the arena can hold
  // the new blocks, then allocates them. Throws context_full / arena_full without side effects.
  void reserve(int seq, int32_t n);
  // Pages for several sequences at once (one batched step): all or nothing.
  void reserve_batch(const std::vector<std::pair<int, int32_t>>& seq_n);
  // After the step's kv_store: the sequence is n tokens longer; blocks the format wants
  // compressed are finalized and sliding-window blocks no longer visible released.
  void commit(int seq, int32_t n);
  // Drops tokens at positions >= n, and returns how many leading tokens the cache still holds
  // exactly as a fresh run of n tokens would (<= n): a block compressed since (the partial block
  // at n, a lossy block back inside E8's raw window) or released by a sliding window cannot be
  // kept. The cache is cut to that many; the caller re-evaluates the rest from its history.
  int32_t truncate(int seq, int32_t n);

  // One layer's K and V of a sequence as BF16 bits [n_tokens][n_head_kv][head_dim] (keys after
  // RoPE), from its raw pages (a sliding-window layer: from its oldest block still held).
  // Returns the number of tokens exported. Used for calibration.
  int32_t export_layer(int seq, int il, std::vector<uint16_t>& k, std::vector<uint16_t>& v) const;

  // Test hook: overwrites the tags of the sequence's first compressed tile in layer il with the
  // reserved value (what memory corruption would look like). Returns false when it has none.
  bool corrupt_first_slot_for_test(int seq, int il);

  // Benchmark hook: grows the sequence to n tokens by repeating its complete blocks (each new
  // tile a byte copy of the tile at block b mod the original count, raw page or slot alike), so a
  // long cache with real KV statistics exists without a quadratic prefill. Needs at least one
  // complete block; throws arena_full like reserve().
  void extend_by_repeating_for_bench(int seq, int32_t n);

  // Benchmark hook: appends n tokens of given KV (BF16 bits [n][n_head_kv][head_dim], keys after
  // RoPE) to the sequence in every layer, as a prefill would store them, then commits (so a format
  // calibrates and compresses them like any other). Lets a benchmark time attention over KV
  // recorded from a real model on a synthetic model of another shape.
  void import_for_bench(int seq, const uint16_t* k, const uint16_t* v, int32_t n);

  KVLayerView layer_view(int il) const;
  const uint32_t* table(int seq, int il) const;  // backend-visible block table of one layer
  KVStats stats() const;

 private:
  struct Sequence;
  int64_t table_entries_per_layer() const;
  int64_t entry_index(int head, int is_v, int half, int32_t block) const;
  template <typename F>
  void for_new_entries(Sequence& s, int32_t n, F&& f);
  void sync_table(int seq);
  void finalize_ready(int seq);
  void queue_block(Sequence& s, int il, int32_t b);
  void flush_finalize(Sequence& s);
  int32_t sink_blocks_ = 0;       // leading blocks never finalized (raw_sink)
  void release_out_of_window(int seq);
  void calibrate_online(int seq);

  const ModelConfig& cfg_;
  Backend& be_;
  KVCacheParams params_;
  std::unique_ptr<KVCodec> codec_;
  int32_t tile_dim_, n_half_;
  int32_t max_blocks_;
  uint64_t page_bytes_;
  std::unique_ptr<KVArena> arena_;
  uint8_t* arena_mem_ = nullptr;         // backend memory
  std::vector<std::unique_ptr<Sequence>> seqs_;
  CodecStats stats_[2];                   // per K / V, over every finalize so far
  std::vector<std::vector<KVFinalizeJob>> pending_;  // per layer: queued encoding jobs (queue_block)
  size_t n_pending_ = 0;
  std::vector<KVFinalizeJob> jobs_;       // scratch (host): the pending jobs, layer after layer
  KVFinalizeJob* dev_jobs_ = nullptr;     // backend copy (== jobs_.data() on host-memory backends)
  size_t dev_jobs_cap_ = 0;
};

}  // namespace gaacrt
