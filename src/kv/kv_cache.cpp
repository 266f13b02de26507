// kv_cache.cpp — page arena, block tables, reserve / commit / truncate.
#include "kv_cache.h"

#include <algorithm>

#include "common/error.h"

namespace gaacrt {

struct KVCache::Sequence {
  int32_t len = 0;                  // tokens stored
  std::vector<uint32_t> table;      // n_layer * entries_per_layer, host copy
  uint32_t* dev_table = nullptr;    // backend copy (== table.data() on host-memory backends)
};

namespace {
int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }
}  // namespace

KVCache::KVCache(const ModelConfig& cfg, Backend& be, const KVCacheParams& p) : cfg_(cfg), be_(be), params_(p) {
  if (cfg.head_dim_k != cfg.head_dim_v)
    throw Error("kv", "unsupported_shape", strfmt("key and value head dims differ (%d vs %d)", cfg.head_dim_k, cfg.head_dim_v));
  if (p.n_ctx <= 0) throw Error("kv", "invalid_argument", strfmt("n_ctx = %d must be positive", p.n_ctx));
  if (p.n_seq_max <= 0) throw Error("kv", "invalid_argument", strfmt("n_seq_max = %d must be positive", p.n_seq_max));
  codec_ = make_codec(p.format, cfg, be);
  tile_dim_ = std::min(cfg.head_dim_k, KV_TILE_MAX_DIM);
  n_half_ = cfg.head_dim_k / tile_dim_;
  max_blocks_ = ceil_div(p.n_ctx, KV_BLOCK_TOKENS);
  page_bytes_ = (uint64_t)KV_BLOCK_TOKENS * tile_dim_ * 2;

  if (p.budget_bytes > 0) {
    n_pages_ = p.budget_bytes / page_bytes_;
  } else {
    // Enough pages for n_seq_max full-length sequences; sliding-window layers hold at most the
    // window plus one prefill chunk plus the partial block at each end.
    uint64_t per_seq = 0;
    for (int il = 0; il < cfg.n_layer; ++il) {
      int32_t blocks = max_blocks_;
      if (cfg.is_swa(il))
        blocks = std::min(blocks, ceil_div(cfg.sliding_window + p.n_ubatch, KV_BLOCK_TOKENS) + 2);
      per_seq += (uint64_t)blocks * cfg.n_head_kv * 2 * n_half_;
    }
    n_pages_ = per_seq * p.n_seq_max;
  }
  if (n_pages_ == 0 || n_pages_ >= KV_ENTRY_SLOT)
    throw Error("kv", "invalid_argument", strfmt("cache arena of %llu pages is out of range", (unsigned long long)n_pages_));
  arena_ = static_cast<uint8_t*>(be_.alloc(n_pages_ * page_bytes_));
  free_pages_.reserve(n_pages_);
  for (uint64_t i = n_pages_; i-- > 0;) free_pages_.push_back((uint32_t)i);  // pop_back gives 0, 1, ...
}

KVCache::~KVCache() {
  for (auto& s : seqs_)
    if (s && s->dev_table != s->table.data()) be_.free(s->dev_table);
  be_.free(arena_);
}

int64_t KVCache::table_entries_per_layer() const { return (int64_t)cfg_.n_head_kv * 2 * n_half_ * max_blocks_; }

int KVCache::new_sequence() {
  auto s = std::make_unique<Sequence>();
  s->table.assign(table_entries_per_layer() * cfg_.n_layer, KV_ENTRY_EMPTY);
  if (be_.shares_host_memory()) {
    s->dev_table = s->table.data();
  } else {
    s->dev_table = static_cast<uint32_t*>(be_.alloc(s->table.size() * sizeof(uint32_t)));
  }
  for (size_t i = 0; i < seqs_.size(); ++i)
    if (!seqs_[i]) {
      seqs_[i] = std::move(s);
      sync_table((int)i);
      return (int)i;
    }
  seqs_.push_back(std::move(s));
  sync_table((int)seqs_.size() - 1);
  return (int)seqs_.size() - 1;
}

void KVCache::free_sequence(int seq) {
  Sequence& s = *seqs_.at(seq);
  for (uint32_t& e : s.table) release_entry(e);
  if (s.dev_table != s.table.data()) be_.free(s.dev_table);
  seqs_[seq].reset();
}

int32_t KVCache::length(int seq) const { return seqs_.at(seq)->len; }

uint32_t KVCache::alloc_page() {
  const uint32_t p = free_pages_.back();
  free_pages_.pop_back();
  return p;
}

void KVCache::release_entry(uint32_t& e) {
  if (e == KV_ENTRY_EMPTY) return;
  if (!(e & KV_ENTRY_SLOT)) free_pages_.push_back(e);
  e = KV_ENTRY_EMPTY;
}

// Calls f(entry) for every tile entry of the blocks that appending n tokens to s touches
// beyond its current length (entries already allocated by an earlier, failed step included).
template <typename F>
void KVCache::for_new_entries(Sequence& s, int32_t n, F&& f) {
  const int32_t b0 = s.len / KV_BLOCK_TOKENS, b1 = ceil_div(s.len + n, KV_BLOCK_TOKENS);
  for (int il = 0; il < cfg_.n_layer; ++il) {
    uint32_t* t = s.table.data() + il * table_entries_per_layer();
    for (int h = 0; h < cfg_.n_head_kv; ++h)
      for (int kv = 0; kv < 2; ++kv)
        for (int half = 0; half < n_half_; ++half)
          for (int32_t b = b0; b < b1; ++b) f(t[(((int64_t)h * 2 + kv) * n_half_ + half) * max_blocks_ + b]);
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
  if (pages > free_pages_.size())
    throw Error("kv", "arena_full", strfmt("KV arena full: this step needs %llu pages of %llu bytes, %zu are free "
                                           "(arena %llu pages); end or truncate a sequence, or give the cache more memory",
                                           (unsigned long long)pages, (unsigned long long)page_bytes_, free_pages_.size(),
                                           (unsigned long long)n_pages_));
  for (auto [seq, n] : seq_n) {
    bool changed = false;
    for_new_entries(*seqs_[seq], n, [&](uint32_t& e) {
      if (e == KV_ENTRY_EMPTY) { e = alloc_page(); changed = true; }
    });
    if (changed) sync_table(seq);
  }
}

void KVCache::commit(int seq, int32_t n) {
  Sequence& s = *seqs_.at(seq);
  s.len += n;
  finalize_ready(seq);
  release_out_of_window(seq);
  sync_table(seq);
}

// Compressed formats move full blocks into slots here (GAAC, E8: issues 5 and 6).
void KVCache::finalize_ready(int) {
  if (codec_->slot_bytes(tile_dim_, false) == 0) return;
}

// Sliding-window layers: a block whose last token can no longer be seen by any future query
// (next query at position len: key j visible iff len - j < window) gives its pages back.
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
          for (int32_t b = 0; b < dead_blocks; ++b)
            release_entry(t[(((int64_t)h * 2 + kv) * n_half_ + half) * max_blocks_ + b]);
  }
}

bool KVCache::truncate(int seq, int32_t n) {
  Sequence& s = *seqs_.at(seq);
  if (n < 0 || n > s.len) throw Error("kv", "invalid_argument", strfmt("truncate(%d): sequence has %d tokens", n, s.len));
  // Tokens still needed: [0, n) on global layers, [n - window + 1, n) on sliding-window layers.
  // If one of those blocks was released (or compressed lossily, issue 6) the cache cannot keep them.
  bool representable = true;
  const int32_t keep_blocks = ceil_div(n, KV_BLOCK_TOKENS);
  for (int il = 0; il < cfg_.n_layer && representable; ++il) {
    const uint32_t* t = s.table.data() + il * table_entries_per_layer();
    int32_t first_needed = 0;
    if (cfg_.is_swa(il)) first_needed = std::max(0, n - cfg_.sliding_window) / KV_BLOCK_TOKENS;
    for (int32_t b = first_needed; b < keep_blocks && representable; ++b)
      if (t[b] == KV_ENTRY_EMPTY) representable = false;  // head 0, K, half 0 stands for the block
  }
  if (!representable) return false;
  for (int il = 0; il < cfg_.n_layer; ++il) {
    uint32_t* t = s.table.data() + il * table_entries_per_layer();
    for (int h = 0; h < cfg_.n_head_kv; ++h)
      for (int kv = 0; kv < 2; ++kv)
        for (int half = 0; half < n_half_; ++half)
          for (int32_t b = keep_blocks; b < max_blocks_; ++b)
            release_entry(t[(((int64_t)h * 2 + kv) * n_half_ + half) * max_blocks_ + b]);
  }
  s.len = n;
  sync_table(seq);
  return true;
}

void KVCache::sync_table(int seq) {
  Sequence& s = *seqs_[seq];
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
  v.pages = arena_;
  v.page_bytes = page_bytes_;
  v.slots = nullptr;
  v.slot_bytes = 0;
  v.codec = codec_->layer_state(il);
  return v;
}

const uint32_t* KVCache::table(int seq, int il) const {
  return seqs_.at(seq)->dev_table + il * table_entries_per_layer();
}

KVStats KVCache::stats() const {
  KVStats st;
  st.arena_bytes = n_pages_ * page_bytes_;
  st.pages_free = free_pages_.size();
  st.raw_pages_used = n_pages_ - free_pages_.size();
  uint64_t table_bytes = 0;
  for (auto& s : seqs_) {
    if (!s) continue;
    st.tokens += s->len;
    table_bytes += s->table.size() * sizeof(uint32_t);
  }
  st.bf16_bytes = st.tokens * cfg_.n_layer * cfg_.n_head_kv * (uint64_t)(cfg_.head_dim_k + cfg_.head_dim_v) * 2;
  st.resident_bytes = st.raw_pages_used * page_bytes_ + table_bytes;
  return st;
}

}  // namespace gaacrt
