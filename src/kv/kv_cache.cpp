// kv_cache.cpp — block tables over the chunked arena: reserve / commit (finalize, window
// release) / truncate, and the statistics.
#include "kv_cache.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace gaacrt {

struct KVCache::Sequence {
  int32_t len = 0;                  // tokens stored
  int32_t finalized = 0;            // blocks [0, finalized) have been through finalize
  std::vector<uint32_t> table;      // n_layer * entries_per_layer, host copy
  uint32_t* dev_table = nullptr;    // backend copy (== table.data() on host-memory backends)
  bool dirty = false;               // commit changed the host table since the last sync_table
};

namespace {
int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }
}  // namespace

KVCache::KVCache(const ModelConfig& cfg, Backend& be, const KVCacheParams& p) : cfg_(cfg), be_(be), params_(p) {
  if (cfg.head_dim_k != cfg.head_dim_v)
    throw Error("kv", "unsupported_shape", strfmt("key and value head dims differ (%d vs %d)", cfg.head_dim_k, cfg.head_dim_v));
  if (p.n_ctx <= 0) throw Error("kv", "invalid_argument", strfmt("n_ctx = %d must be positive", p.n_ctx));
  if (p.n_seq_max <= 0) throw Error("kv", "invalid_argument", strfmt("n_seq_max = %d must be positive", p.n_seq_max));
  codec_ = make_codec(p.format, cfg, be, p);
  if (p.raw_sink < 0) throw Error("kv", "invalid_argument", strfmt("raw_sink = %d must not be negative", p.raw_sink));
  if (p.raw_sink > 0 && codec_->lossless())
    throw Error("kv", "invalid_argument", strfmt("raw_sink applies to lossy cache formats (e8, q8, kivi2), not '%s'", codec_->name()));
  sink_blocks_ = ceil_div(p.raw_sink, KV_BLOCK_TOKENS);
  if (p.raw_window < -1)
    throw Error("kv", "invalid_argument", strfmt("raw_window = %d: expected -1 (the format's default) or a token count", p.raw_window));
  if (p.raw_window >= 0 && p.format == KVFormat::BF16)
    throw Error("kv", "invalid_argument", "raw_window applies to compressing cache formats (gaac, e8, q8, kivi2), not 'bf16'");
  tile_dim_ = std::min(cfg.head_dim_k, KV_TILE_MAX_DIM);
  n_half_ = cfg.head_dim_k / tile_dim_;
  max_blocks_ = ceil_div(p.n_ctx, KV_BLOCK_TOKENS);
  page_bytes_ = (uint64_t)KV_BLOCK_TOKENS * tile_dim_ * 2;

  uint64_t n_pages;
  if (p.budget_bytes > 0) {
    n_pages = p.budget_bytes / page_bytes_;
  } else {
    // Enough raw pages for n_seq_max full-length sequences (compression only ever frees pages);
    // sliding-window layers hold at most the window plus one prefill chunk plus partial blocks.
    // With a compressing format they get one more chunk's worth: a step finalizes its blocks into
    // slots before the blocks that left the window give theirs back, and the freed slots leave
    // slot chunks part-empty that pages cannot use (seen: Gemma-3, GAAC, n_ctx 2048, a 2,000-token
    // prompt ran out of pages at its fourth 512-token chunk).
    const bool compressing = p.format != KVFormat::BF16 && !p.keep_raw;
    const int32_t swa_tokens = cfg.sliding_window + p.n_ubatch * (compressing ? 2 : 1);
    uint64_t per_seq = 0;
    for (int il = 0; il < cfg.n_layer; ++il) {
      int32_t blocks = max_blocks_;
      if (cfg.is_swa(il)) blocks = std::min(blocks, ceil_div(swa_tokens, KV_BLOCK_TOKENS) + 2);
      per_seq += (uint64_t)blocks * cfg.n_head_kv * 2 * n_half_;
    }
    n_pages = per_seq * p.n_seq_max;
    // A compressing format needs free chunks for its slots while the pages it compresses are still
    // held: a prefill chunk that fills every page otherwise leaves no chunk for the first slot, and
    // every tile stays raw (seen: SmolLM2, n_ctx 512, a 500-token prompt, GAAC resident ratio
    // 0.998). Pages are allocated block by block, so once one block's tiles have slots its pages
    // free whole chunks and the rest rolls on: one block's worth of pages (slots are smaller) plus
    // one chunk per slot class is enough.
    if (compressing)
      n_pages += (uint64_t)cfg.n_layer * cfg.n_head_kv * 2 * n_half_ + 2 * KV_CHUNK_PAGES;
  }
  const uint64_t n_chunks = (n_pages + KV_CHUNK_PAGES - 1) / KV_CHUNK_PAGES;
  if (n_chunks == 0) throw Error("kv", "invalid_argument", strfmt("a KV budget of %llu bytes holds no page of %llu bytes",
                                                                  (unsigned long long)p.budget_bytes, (unsigned long long)page_bytes_));
  arena_ = std::make_unique<KVArena>(n_chunks, page_bytes_);
  for (int cls = 0; cls < 2; ++cls) arena_->set_slot_bytes(cls, codec_->slot_bytes(tile_dim_, cls == 1));
  arena_mem_ = static_cast<uint8_t*>(be_.alloc(n_chunks * arena_->chunk_bytes()));
}

KVCache::~KVCache() {
  for (auto& s : seqs_)
    if (s && s->dev_table != s->table.data()) be_.free(s->dev_table);
  if (dev_jobs_ && dev_jobs_ != jobs_.data()) be_.free(dev_jobs_);
  be_.free(arena_mem_);
}

int64_t KVCache::table_entries_per_layer() const { return (int64_t)cfg_.n_head_kv * 2 * n_half_ * max_blocks_; }
int64_t KVCache::entry_index(int h, int is_v, int half, int32_t b) const {
  return (((int64_t)h * 2 + is_v) * n_half_ + half) * max_blocks_ + b;
}

int KVCache::new_sequence() {
  auto s = std::make_unique<Sequence>();
  s->table.assign(table_entries_per_layer() * cfg_.n_layer, KV_ENTRY_EMPTY);
  s->dev_table = be_.shares_host_memory() ? s->table.data()
                                          : static_cast<uint32_t*>(be_.alloc(s->table.size() * sizeof(uint32_t)));
  size_t id = 0;
  while (id < seqs_.size() && seqs_[id]) ++id;
  if (id == seqs_.size()) seqs_.emplace_back();
  seqs_[id] = std::move(s);
  sync_table((int)id);
  return (int)id;
}

void KVCache::free_sequence(int seq) {
  Sequence& s = *seqs_.at(seq);
  for (uint32_t& e : s.table) {
    arena_->free_entry(e);
    e = KV_ENTRY_EMPTY;
  }
  if (s.dev_table != s.table.data()) be_.free(s.dev_table);
  seqs_[seq].reset();
}

int32_t KVCache::length(int seq) const { return seqs_.at(seq)->len; }

// Calls f(entry) for every tile entry of the blocks that appending n tokens to s touches
// beyond its current length (entries already allocated by an earlier, failed step included).
// Block-major order: a block's pages (all layers, heads, K/V) are allocated together, so they
// share chunks and finalizing the block frees whole chunks that its slots can then use.
template <typename F>
void KVCache::for_new_entries(Sequence& s, int32_t n, F&& f) {
  const int32_t b0 = s.len / KV_BLOCK_TOKENS, b1 = ceil_div(s.len + n, KV_BLOCK_TOKENS);
  for (int32_t b = b0; b < b1; ++b)
    for (int il = 0; il < cfg_.n_layer; ++il) {
      uint32_t* t = s.table.data() + il * table_entries_per_layer();
      for (int h = 0; h < cfg_.n_head_kv; ++h)
        for (int kv = 0; kv < 2; ++kv)
          for (int half = 0; half < n_half_; ++half) f(t[entry_index(h, kv, half, b)]);
    }
}

void KVCache::reserve(int seq, int32_t n) { reserve_batch({{seq, n}}); }

void KVCache::reserve_batch(const std::vector<std::pair<int, int32_t>>& seq_n) {
  uint64_t pages = 0;
  for (size_t i = 0; i < seq_n.size(); ++i) {
    const auto [seq, n] = seq_n[i];
    for (size_t j = 0; j < i; ++j)
      if (seq_n[j].first == seq) throw Error("kv", "invalid_argument", strfmt("sequence %d appears twice in one step", seq));
    Sequence& s = *seqs_.at(seq);
    if (n < 0) throw Error("kv", "invalid_argument", "reserve: negative token count");
    if ((int64_t)s.len + n > params_.n_ctx)
      throw Error("kv", "context_full", strfmt("sequence %d: %d tokens + %d new would pass the context length %d",
                                               seq, s.len, n, params_.n_ctx));
    for_new_entries(s, n, [&](uint32_t& e) { pages += e == KV_ENTRY_EMPTY; });
  }
  if (pages > arena_->pages_available())
    throw Error("kv", "arena_full", strfmt("KV arena full: this step needs %llu pages of %llu bytes, %llu are free "
                                           "(arena %llu chunks of %u pages); end or truncate a sequence, or give the "
                                           "cache more memory", (unsigned long long)pages, (unsigned long long)page_bytes_,
                                           (unsigned long long)arena_->pages_available(),
                                           (unsigned long long)arena_->n_chunks(), KV_CHUNK_PAGES));
  for (auto [seq, n] : seq_n) {
    bool changed = false;
    for_new_entries(*seqs_[seq], n, [&](uint32_t& e) {
      if (e == KV_ENTRY_EMPTY) { e = arena_->alloc_page(); changed = true; }
    });
    if (changed) sync_table(seq);
  }
}

void KVCache::commit(int seq, int32_t n) {
  Sequence& s = *seqs_.at(seq);
  s.len += n;
  finalize_ready(seq);
  release_out_of_window(seq);
  // Most decode steps change no entry (new blocks were synced by reserve): no per-token upload.
  if (s.dirty) sync_table(seq);
}

int32_t KVCache::export_layer(int seq, int il, std::vector<uint16_t>& k, std::vector<uint16_t>& v) const {
  const Sequence& s = *seqs_.at(seq);
  const int32_t n_tok = s.len, d = cfg_.head_dim_k, H = cfg_.n_head_kv;
  const uint32_t* t = s.table.data() + il * table_entries_per_layer();
  int32_t first = 0;  // a sliding-window layer may have released its oldest blocks already
  while (first < n_tok && t[entry_index(0, 0, 0, first / KV_BLOCK_TOKENS)] == KV_ENTRY_EMPTY) first += KV_BLOCK_TOKENS;
  std::vector<uint16_t> page(page_bytes_ / 2);
  k.assign((size_t)(n_tok - first) * H * d, 0);
  v.assign(k.size(), 0);
  for (int h = 0; h < H; ++h)
    for (int is_v = 0; is_v < 2; ++is_v)
      for (int half = 0; half < n_half_; ++half)
        for (int32_t b = first / KV_BLOCK_TOKENS; b < ceil_div(n_tok, KV_BLOCK_TOKENS); ++b) {
          const uint32_t e = t[entry_index(h, is_v, half, b)];
          if (e & KV_ENTRY_SLOT)
            throw Error("kv", "invalid_argument", "export_layer: the sequence holds compressed blocks (use a bf16 cache)");
          be_.download(page.data(), arena_mem_ + (uint64_t)e * page_bytes_, page_bytes_);
          for (int32_t r = 0; r < KV_BLOCK_TOKENS && b * KV_BLOCK_TOKENS + r < n_tok; ++r) {
            const int32_t tok = b * KV_BLOCK_TOKENS + r - first;
            uint16_t* dst = (is_v ? v : k).data() + ((size_t)tok * H + h) * d + half * tile_dim_;
            std::memcpy(dst, page.data() + r * tile_dim_, tile_dim_ * 2);
          }
        }
  return n_tok - first;
}

// A format that calibrates itself reads the raw KV of the first prefill (the blocks about to be
// finalized and the tail), layer by layer, fits its parameters and freezes them.
void KVCache::calibrate_online(int seq) {
  std::vector<uint16_t> k, v;
  for (int il = 0; il < cfg_.n_layer; ++il) {
    const int32_t n = export_layer(seq, il, k, v);
    codec_->calibrate_add(il, k.data(), v.data(), n);
  }
  codec_->calibrate_finish(seqs_[seq]->len);
  for (int cls = 0; cls < 2; ++cls) arena_->set_slot_bytes(cls, codec_->slot_bytes(tile_dim_, cls == 1));
  if (!codec_->transforms_raw_pages()) return;
  // FP8 formats: what was stored before the scales existed is rounded through FP8 now, in every
  // live sequence, so that every value the cache holds from here on is an FP8 value.
  std::vector<uint16_t> page(page_bytes_ / 2);
  for (auto& sp : seqs_) {
    if (!sp) continue;
    for (int il = 0; il < cfg_.n_layer; ++il) {
      const uint32_t* t = sp->table.data() + il * table_entries_per_layer();
      for (int h = 0; h < cfg_.n_head_kv; ++h)
        for (int is_v = 0; is_v < 2; ++is_v)
          for (int half = 0; half < n_half_; ++half)
            for (int32_t b = 0; b < max_blocks_; ++b) {
              const uint32_t e = t[entry_index(h, is_v, half, b)];
              if (e == KV_ENTRY_EMPTY || (e & KV_ENTRY_SLOT)) continue;
              uint8_t* dev = arena_mem_ + (uint64_t)e * page_bytes_;
              be_.download(page.data(), dev, page_bytes_);
              codec_->transform_raw_page(il, h, is_v == 1, page.data(), (int32_t)page.size());
              be_.upload(dev, page.data(), page_bytes_);
            }
    }
  }
}

// Blocks the format wants compressed: complete, and older than its raw window. Slots are taken
// block by block (all layers of a block, then the next) and the encoding is batched: one upload,
// one kernel per layer and one download for all of them (a 512-token prefill of a 32-layer model
// made 1,024 round trips to the GPU when each block and layer was its own). Where the arena has
// no slot left, the batch so far is encoded first, so the pages it frees make room, as block by
// block would.
void KVCache::finalize_ready(int seq) {
  Sequence& s = *seqs_[seq];
  if (params_.format == KVFormat::BF16) return;
  const int32_t ready_blocks = std::max(0, (s.len - codec_->raw_window()) / KV_BLOCK_TOKENS);
  if (ready_blocks <= s.finalized) return;
  if (!codec_->ready()) calibrate_online(seq);
  if (params_.keep_raw) {
    s.finalized = ready_blocks;
    return;
  }
  // The first sink_blocks_ blocks (the attention sink, raw_sink) stay raw BF16 for good.
  for (int32_t b = std::max(s.finalized, sink_blocks_); b < ready_blocks; ++b)
    for (int il = 0; il < cfg_.n_layer; ++il) queue_block(s, il, b);
  flush_finalize(s);
  s.finalized = ready_blocks;
}

// Takes a slot for each raw tile of block b in layer il and queues its encoding job.
void KVCache::queue_block(Sequence& s, int il, int32_t b) {
  const uint32_t* t = s.table.data() + il * table_entries_per_layer();
  if (pending_.size() != (size_t)cfg_.n_layer) pending_.assign(cfg_.n_layer, {});
  for (int h = 0; h < cfg_.n_head_kv; ++h)
    for (int is_v = 0; is_v < 2; ++is_v)
      for (int half = 0; half < n_half_; ++half) {
        const uint32_t e = t[entry_index(h, is_v, half, b)];
        if (e == KV_ENTRY_EMPTY || (e & KV_ENTRY_SLOT)) continue;  // released, or already a slot
        uint32_t slot = arena_->alloc_slot(is_v);
        if (slot == KV_ENTRY_EMPTY && n_pending_ > 0) {  // encode what is queued: its pages make room
          flush_finalize(s);
          slot = arena_->alloc_slot(is_v);
        }
        if (slot == KV_ENTRY_EMPTY) {  // no room for a slot: the tile keeps its page
          ++stats_[is_v].tiles_raw;
          continue;
        }
        pending_[il].push_back({h, is_v, half, b, e, slot, 0, 0});
        ++n_pending_;
      }
}

// Encodes every queued job (one upload, a kv_finalize per layer, one download) and puts the
// slots that fit in the tables (their pages freed); the others give their slot back.
void KVCache::flush_finalize(Sequence& s) {
  if (n_pending_ == 0) return;
  jobs_.clear();
  std::vector<size_t> first(cfg_.n_layer + 1, 0);  // layer il's jobs: jobs_[first[il], first[il + 1])
  for (int il = 0; il < cfg_.n_layer; ++il) {
    first[il] = jobs_.size();
    jobs_.insert(jobs_.end(), pending_[il].begin(), pending_[il].end());
    pending_[il].clear();
  }
  first[cfg_.n_layer] = jobs_.size();
  n_pending_ = 0;
  KVFinalizeJob* jobs = jobs_.data();
  if (!be_.shares_host_memory()) {
    if (dev_jobs_cap_ < jobs_.size()) {
      if (dev_jobs_) be_.free(dev_jobs_);
      dev_jobs_cap_ = std::max<size_t>(jobs_.size() * 2, 256);
      dev_jobs_ = static_cast<KVFinalizeJob*>(be_.alloc(dev_jobs_cap_ * sizeof(KVFinalizeJob)));
    }
    be_.upload(dev_jobs_, jobs_.data(), jobs_.size() * sizeof(KVFinalizeJob));
    jobs = dev_jobs_;
  }
  for (int il = 0; il < cfg_.n_layer; ++il)
    if (first[il + 1] > first[il])
      be_.kv_finalize(layer_view(il), jobs + first[il], (int64_t)(first[il + 1] - first[il]));
  if (jobs != jobs_.data()) be_.download(jobs_.data(), jobs, jobs_.size() * sizeof(KVFinalizeJob));
  for (int il = 0; il < cfg_.n_layer; ++il) {
    if (first[il + 1] == first[il]) continue;
    uint32_t* t = s.table.data() + il * table_entries_per_layer();
    const KVLayerView view = layer_view(il);
    for (size_t i = first[il]; i < first[il + 1]; ++i) {
      const KVFinalizeJob& j = jobs_[i];
      uint32_t& e = t[entry_index(j.head, j.is_v, j.half, j.block)];
      codec_->account(j, be_.shares_host_memory() ? kv_entry_ptr(view, j.slot, j.is_v) : nullptr, stats_[j.is_v]);
      if (j.fits) {
        arena_->free_page(e);
        e = j.slot;
        s.dirty = true;
      } else {
        arena_->free_slot(j.slot);
      }
    }
  }
}

// Sliding-window layers: a block whose last token can no longer be seen by any future query
// (next query at position len: key j visible iff len - j < window) gives its storage back.
void KVCache::release_out_of_window(int seq) {
  Sequence& s = *seqs_[seq];
  if (cfg_.sliding_window <= 0) return;
  const int32_t first_visible = s.len - cfg_.sliding_window + 1;  // oldest key the next query sees
  const int32_t dead_blocks = first_visible > 0 ? first_visible / KV_BLOCK_TOKENS : 0;
  for (int il = 0; il < cfg_.n_layer; ++il) {
    if (!cfg_.is_swa(il)) continue;
    uint32_t* t = s.table.data() + il * table_entries_per_layer();
    for (int h = 0; h < cfg_.n_head_kv; ++h)
      for (int kv = 0; kv < 2; ++kv)
        for (int half = 0; half < n_half_; ++half)
          for (int32_t b = 0; b < dead_blocks; ++b) {
            uint32_t& e = t[entry_index(h, kv, half, b)];
            if (e != KV_ENTRY_EMPTY) s.dirty = true;
            arena_->free_entry(e);
            e = KV_ENTRY_EMPTY;
          }
  }
}

int32_t KVCache::truncate(int seq, int32_t n) {
  Sequence& s = *seqs_.at(seq);
  if (n < 0 || n > s.len) throw Error("kv", "invalid_argument", strfmt("truncate(%d): sequence has %d tokens", n, s.len));
  int32_t keep = n;
  // The partial block at n, if already finalized, cannot take new tokens: cut back to its start.
  if (n % KV_BLOCK_TOKENS != 0 && n / KV_BLOCK_TOKENS < s.finalized) keep = n / KV_BLOCK_TOKENS * KV_BLOCK_TOKENS;
  // A lossy format: a block that a fresh run of `keep` tokens would still hold raw (inside the
  // raw window) but that was compressed since must be recomputed.
  if (!codec_->lossless()) {
    // (the sink blocks are raw at any length: the first block a fresh run compresses is sink_blocks_)
    const int32_t raw_from = std::max(sink_blocks_, std::max(0, keep - codec_->raw_window()) / KV_BLOCK_TOKENS);
    if (raw_from < s.finalized) keep = std::min(keep, raw_from * KV_BLOCK_TOKENS);
  }
  // Sliding-window layers need [keep - window + 1, keep): if any of those blocks was released,
  // nothing short of a full re-evaluation brings them back.
  for (int il = 0; il < cfg_.n_layer && keep > 0; ++il) {
    if (!cfg_.is_swa(il)) continue;
    const uint32_t* t = s.table.data() + il * table_entries_per_layer();
    const int32_t first_needed = std::max(0, keep - cfg_.sliding_window + 1) / KV_BLOCK_TOKENS;
    for (int32_t b = first_needed; b < ceil_div(keep, KV_BLOCK_TOKENS); ++b)
      if (t[entry_index(0, 0, 0, b)] == KV_ENTRY_EMPTY) {
        keep = 0;
        break;
      }
  }
  const int32_t keep_blocks = ceil_div(keep, KV_BLOCK_TOKENS);
  for (int il = 0; il < cfg_.n_layer; ++il) {
    uint32_t* t = s.table.data() + il * table_entries_per_layer();
    for (int h = 0; h < cfg_.n_head_kv; ++h)
      for (int kv = 0; kv < 2; ++kv)
        for (int half = 0; half < n_half_; ++half)
          for (int32_t b = keep == 0 ? 0 : keep_blocks; b < max_blocks_; ++b) {
            uint32_t& e = t[entry_index(h, kv, half, b)];
            if (e != KV_ENTRY_EMPTY) s.dirty = true;
            arena_->free_entry(e);
            e = KV_ENTRY_EMPTY;
          }
  }
  s.len = keep;
  s.finalized = std::min(s.finalized, keep / KV_BLOCK_TOKENS);
  sync_table(seq);
  return keep;
}

bool KVCache::corrupt_first_slot_for_test(int seq, int il) {
  const Sequence& s = *seqs_.at(seq);
  const uint32_t* t = s.table.data() + il * table_entries_per_layer();
  for (int64_t i = 0; i < table_entries_per_layer(); ++i) {
    if (!kv_entry_is_slot(t[i]) || params_.format != KVFormat::GAAC) continue;
    const int is_v = (int)((i / ((int64_t)n_half_ * max_blocks_)) % 2);
    uint8_t* slot = kv_entry_ptr(layer_view(il), t[i], is_v);
    // Tags sit after the sign+mantissa bytes and the code words (codec/gaac/gaac_format.h).
    std::vector<uint8_t> ff(tile_dim_ / 2, 0xFF);
    be_.upload(slot + 22 * (uint64_t)tile_dim_, ff.data(), ff.size());
    return true;
  }
  return false;
}

// The bytes move in bulk, not tile by tile: an 8B model at 64K tokens has about two million tiles,
// and two synchronous transfers per tile would take a minute on a GPU. Every copy is planned first
// (destinations allocated block-major, as reserve() does, so they mostly lie in consecutive
// memory); then the source tiles are read in coalesced spans and the destinations written in runs
// of consecutive bytes. Host-memory backends take the same path (download/upload are copies there),
// so the CPU tests cover what the GPU runs.
void KVCache::extend_by_repeating_for_bench(int seq, int32_t n) {
  Sequence& s = *seqs_.at(seq);
  const int32_t src_blocks = s.len / KV_BLOCK_TOKENS;
  if (src_blocks == 0) throw Error("kv", "invalid_argument", "extend_by_repeating_for_bench: no complete block to repeat");
  if (cfg_.sliding_window > 0) throw Error("kv", "invalid_argument", "extend_by_repeating_for_bench: sliding-window models");
  if (n > params_.n_ctx) throw Error("kv", "context_full", strfmt("extend to %d tokens > n_ctx %d", n, params_.n_ctx));
  if (n <= s.len) return;
  // A partial last block is dropped first (its unwritten rows would be read as keys).
  const int32_t b0 = src_blocks, b1 = ceil_div(n, KV_BLOCK_TOKENS);
  auto free_from = [&](int32_t first_block) {  // blocks [first_block, b1): the partial one and new ones
    for (int il = 0; il < cfg_.n_layer; ++il) {
      uint32_t* t = s.table.data() + il * table_entries_per_layer();
      for (int h = 0; h < cfg_.n_head_kv; ++h)
        for (int is_v = 0; is_v < 2; ++is_v)
          for (int half = 0; half < n_half_; ++half)
            for (int32_t b = first_block; b < b1; ++b) {
              uint32_t& e = t[entry_index(h, is_v, half, b)];
              arena_->free_entry(e);
              e = KV_ENTRY_EMPTY;
            }
    }
  };
  free_from(b0);
  s.len = b0 * KV_BLOCK_TOKENS;
  s.finalized = std::min(s.finalized, b0);

  struct Copy { uint64_t src, dst, bytes; };  // byte offsets in the arena
  const KVLayerView view = layer_view(0);      // entry -> address is the same in every layer
  auto offset = [&](uint32_t e, int is_v) { return (uint64_t)(kv_entry_ptr(view, e, is_v) - arena_mem_); };
  std::vector<Copy> copies;
  for (int32_t b = b0; b < b1; ++b)
    for (int il = 0; il < cfg_.n_layer; ++il) {
      uint32_t* t = s.table.data() + il * table_entries_per_layer();
      for (int h = 0; h < cfg_.n_head_kv; ++h)
        for (int is_v = 0; is_v < 2; ++is_v)
          for (int half = 0; half < n_half_; ++half) {
            const uint32_t src = t[entry_index(h, is_v, half, b % src_blocks)];
            const bool slot = kv_entry_is_slot(src);
            const uint32_t dst = slot ? arena_->alloc_slot(is_v) : arena_->alloc_page();
            if (dst == KV_ENTRY_EMPTY) {  // nothing is kept: the sequence is as it was (less a partial block)
              free_from(b0);
              sync_table(seq);
              throw Error("kv", "arena_full", strfmt("extend_by_repeating_for_bench: arena full at block %d of %d", b, b1));
            }
            t[entry_index(h, is_v, half, b)] = dst;
            copies.push_back({offset(src, is_v), offset(dst, is_v), slot ? arena_->slot_bytes(is_v) : page_bytes_});
          }
    }

  {
    // Source spans: the distinct source tiles sorted by address, merged across gaps under 1 MiB.
    std::vector<std::pair<uint64_t, uint64_t>> tiles;  // (offset, end)
    for (const Copy& c : copies) tiles.emplace_back(c.src, c.src + c.bytes);
    std::sort(tiles.begin(), tiles.end());
    struct Span { uint64_t begin, end; size_t host; };
    std::vector<Span> spans;
    for (const auto& [lo, hi] : tiles) {
      if (!spans.empty() && lo <= spans.back().end + (1u << 20)) spans.back().end = std::max(spans.back().end, hi);
      else spans.push_back({lo, hi, 0});
    }
    size_t total = 0;
    for (Span& sp : spans) { sp.host = total; total += sp.end - sp.begin; }
    std::vector<uint8_t> src_host(total);
    for (const Span& sp : spans) be_.download(src_host.data() + sp.host, arena_mem_ + sp.begin, sp.end - sp.begin);
    auto src_of = [&](uint64_t off) {
      auto it = std::upper_bound(spans.begin(), spans.end(), off, [](uint64_t o, const Span& sp) { return o < sp.begin; });
      --it;
      return src_host.data() + it->host + (off - it->begin);
    };
    // Destination runs: consecutive addresses staged and written together (at most 64 MiB at a time).
    std::sort(copies.begin(), copies.end(), [](const Copy& a, const Copy& b) { return a.dst < b.dst; });
    std::vector<uint8_t> run;
    uint64_t run_begin = 0;
    auto flush = [&] {
      if (!run.empty()) be_.upload(arena_mem_ + run_begin, run.data(), run.size());
      run.clear();
    };
    for (const Copy& c : copies) {
      if (run.empty() || c.dst != run_begin + run.size() || run.size() >= (64u << 20)) {
        flush();
        run_begin = c.dst;
      }
      const uint8_t* from = src_of(c.src);
      run.insert(run.end(), from, from + c.bytes);
    }
    flush();
  }
  s.len = n;
  // Blocks the format compresses: copies of raw blocks are finalized like any others; copies of
  // blocks that went through finalize already are not (their slots were copied, and their raw
  // tiles would not fit a slot again), so a GAAC cache is not re-encoded block by block.
  const int32_t fin0 = s.finalized;
  if (!codec_->ready() || params_.keep_raw) {
    finalize_ready(seq);
  } else if (params_.format != KVFormat::BF16) {
    const int32_t ready_blocks = std::max(0, (s.len - codec_->raw_window()) / KV_BLOCK_TOKENS);
    for (int32_t b = std::max(s.finalized, sink_blocks_); b < ready_blocks; ++b) {
      const int32_t from = b % src_blocks;
      if (b >= b0 && from < fin0 && from >= sink_blocks_) continue;
      for (int il = 0; il < cfg_.n_layer; ++il) queue_block(s, il, b);
    }
    flush_finalize(s);
    s.finalized = std::max(s.finalized, ready_blocks);
  }
  sync_table(seq);
}

void KVCache::import_for_bench(int seq, const uint16_t* k, const uint16_t* v, int32_t n) {
  if (cfg_.head_dim_k != cfg_.head_dim_v)
    throw Error("kv", "invalid_argument", "import_for_bench: K and V head dims differ");
  reserve(seq, n);
  Sequence& s = *seqs_.at(seq);
  const int32_t d = cfg_.head_dim_k, H = cfg_.n_head_kv, p0 = s.len;
  std::vector<uint16_t> page(page_bytes_ / 2);
  for (int il = 0; il < cfg_.n_layer; ++il) {
    const uint32_t* t = s.table.data() + il * table_entries_per_layer();
    for (int h = 0; h < H; ++h)
      for (int is_v = 0; is_v < 2; ++is_v)
        for (int half = 0; half < n_half_; ++half)
          for (int32_t b = p0 / KV_BLOCK_TOKENS; b < ceil_div(p0 + n, KV_BLOCK_TOKENS); ++b) {
            uint8_t* dst = arena_mem_ + (uint64_t)t[entry_index(h, is_v, half, b)] * page_bytes_;
            be_.download(page.data(), dst, page_bytes_);  // a partial first block keeps its rows
            for (int32_t r = 0; r < KV_BLOCK_TOKENS; ++r) {
              const int32_t tok = b * KV_BLOCK_TOKENS + r - p0;
              if (tok < 0 || tok >= n) continue;
              const uint16_t* src = (is_v ? v : k) + ((size_t)tok * H + h) * d + half * tile_dim_;
              std::memcpy(page.data() + r * tile_dim_, src, tile_dim_ * 2);
            }
            be_.upload(dst, page.data(), page_bytes_);
          }
  }
  be_.synchronize();
  commit(seq, n);
}

void KVCache::sync_table(int seq) {
  Sequence& s = *seqs_[seq];
  s.dirty = false;
  if (s.dev_table != s.table.data()) be_.upload(s.dev_table, s.table.data(), s.table.size() * sizeof(uint32_t));
}

KVLayerView KVCache::layer_view(int il) const {
  KVLayerView v{};
  v.format = params_.format;
  v.layer = il;
  v.n_head_kv = cfg_.n_head_kv;
  v.head_dim_k = cfg_.head_dim_k;
  v.head_dim_v = cfg_.head_dim_v;
  v.tile_dim = tile_dim_;
  v.n_half = n_half_;
  v.max_blocks = max_blocks_;
  v.arena = arena_mem_;
  v.page_bytes = page_bytes_;
  v.chunk_bytes = arena_->chunk_bytes();
  v.slot_bytes[0] = arena_->slot_bytes(0);
  v.slot_bytes[1] = arena_->slot_bytes(1);
  v.codec = codec_->layer_state(il);
  return v;
}

const uint32_t* KVCache::table(int seq, int il) const {
  return seqs_.at(seq)->dev_table + il * table_entries_per_layer();
}

KVStats KVCache::stats() const {
  KVStats st;
  st.arena_bytes = arena_->n_chunks() * arena_->chunk_bytes();
  st.pages_free = arena_->pages_available();
  st.raw_pages_used = arena_->pages_used();
  st.slots_used = arena_->slots_used(0) + arena_->slots_used(1);
  uint64_t table_bytes = 0;
  for (auto& s : seqs_) {
    if (!s) continue;
    st.tokens += s->len;
    for (uint32_t e : s->table) {
      if (e == KV_ENTRY_EMPTY) continue;
      table_bytes += sizeof(uint32_t);
      (e & KV_ENTRY_SLOT ? st.tiles_slot : st.tiles_raw) += 1;
    }
  }
  st.bf16_bytes = (st.tiles_raw + st.tiles_slot) * page_bytes_;
  st.resident_bytes = st.raw_pages_used * page_bytes_ + arena_->slots_used(0) * arena_->slot_bytes(0) +
                      arena_->slots_used(1) * arena_->slot_bytes(1) + table_bytes;
  st.codec[0] = stats_[0];
  st.codec[1] = stats_[1];
  return st;
}

}  // namespace gaacrt
