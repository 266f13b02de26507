// kv_arena.cpp — chunk, page and slot allocation.
#include "kv_arena.h"

#include <algorithm>

#include "common/error.h"

namespace gaacrt {

KVArena::KVArena(uint64_t n_chunks, uint64_t page_bytes) : page_bytes_(page_bytes), chunks_(n_chunks) {
  if (n_chunks == 0 || n_chunks > (KV_ENTRY_SLOT >> KV_SLOT_SUB_BITS))
    throw Error("kv", "invalid_argument", strfmt("KV arena of %llu chunks is out of range", (unsigned long long)n_chunks));
  free_chunks_.reserve(n_chunks);
  for (uint64_t c = n_chunks; c-- > 0;) free_chunks_.push_back((uint32_t)c);  // chunk 0 is taken first
}

void KVArena::set_slot_bytes(int cls, uint64_t bytes) {
  slot_bytes_[cls] = bytes;
  slots_per_chunk_[cls] = bytes == 0 ? 0 : (uint32_t)std::min<uint64_t>(KV_SLOTS_PER_CHUNK_MAX, chunk_bytes() / bytes);
  if (bytes > 0 && slots_per_chunk_[cls] == 0)
    throw Error("kv", "invalid_argument", strfmt("a slot of %llu bytes does not fit a chunk of %llu",
                                                 (unsigned long long)bytes, (unsigned long long)chunk_bytes()));
}

int KVArena::first_zero(const Chunk& ch, uint32_t n_units) {
  for (uint32_t w = 0; w * 64 < n_units; ++w) {
    const uint64_t free_bits = ~ch.mask[w];
    if (free_bits == 0) continue;
    const int i = (int)(w * 64) + __builtin_ctzll(free_bits);
    return i < (int)n_units ? i : -1;
  }
  return -1;
}

uint32_t KVArena::take_chunk(Kind k) {
  if (free_chunks_.empty()) return KV_ENTRY_EMPTY;
  const uint32_t c = free_chunks_.back();
  free_chunks_.pop_back();
  chunks_[c] = Chunk{};
  chunks_[c].kind = k;
  partial_[k - PAGES].push_back(c);
  if (k == PAGES) partial_free_pages_ += KV_CHUNK_PAGES;
  return c;
}

void KVArena::release_if_empty(uint32_t c) {
  Chunk& ch = chunks_[c];
  if (ch.used != 0) return;
  auto& part = partial_[ch.kind - PAGES];
  part.erase(std::find(part.begin(), part.end(), c));
  if (ch.kind == PAGES) partial_free_pages_ -= KV_CHUNK_PAGES;
  ch.kind = FREE;
  free_chunks_.push_back(c);
}

uint32_t KVArena::alloc_page() {
  auto& part = partial_[0];
  if (part.empty() && take_chunk(PAGES) == KV_ENTRY_EMPTY) return KV_ENTRY_EMPTY;
  const uint32_t c = part.back();
  Chunk& ch = chunks_[c];
  const int i = first_zero(ch, KV_CHUNK_PAGES);
  ch.mask[i / 64] |= 1ull << (i % 64);
  if (++ch.used == KV_CHUNK_PAGES) part.pop_back();
  --partial_free_pages_;
  ++pages_used_;
  return c * KV_CHUNK_PAGES + (uint32_t)i;
}

void KVArena::free_page(uint32_t page) {
  const uint32_t c = page / KV_CHUNK_PAGES, i = page % KV_CHUNK_PAGES;
  Chunk& ch = chunks_.at(c);
  if (ch.kind != PAGES || !((ch.mask[i / 64] >> (i % 64)) & 1))
    throw Error("kv", "internal", strfmt("free of page %u that is not allocated", page));
  if (ch.used == KV_CHUNK_PAGES) partial_[0].push_back(c);
  ch.mask[i / 64] &= ~(1ull << (i % 64));
  --ch.used;
  ++partial_free_pages_;
  --pages_used_;
  release_if_empty(c);
}

uint32_t KVArena::alloc_slot(int cls) {
  const uint32_t n = slots_per_chunk_[cls];
  if (n == 0) return KV_ENTRY_EMPTY;
  auto& part = partial_[1 + cls];
  if (part.empty() && take_chunk(cls ? SLOTS_V : SLOTS_K) == KV_ENTRY_EMPTY) return KV_ENTRY_EMPTY;
  const uint32_t c = part.back();
  Chunk& ch = chunks_[c];
  const int i = first_zero(ch, n);
  ch.mask[i / 64] |= 1ull << (i % 64);
  if (++ch.used == n) part.pop_back();
  ++slots_used_[cls];
  return KV_ENTRY_SLOT | (c << KV_SLOT_SUB_BITS) | (uint32_t)i;
}

void KVArena::free_slot(uint32_t entry) {
  const uint32_t c = (entry & ~KV_ENTRY_SLOT) >> KV_SLOT_SUB_BITS, i = entry & KV_SLOT_SUB_MASK;
  Chunk& ch = chunks_.at(c);
  if ((ch.kind != SLOTS_K && ch.kind != SLOTS_V) || !((ch.mask[i / 64] >> (i % 64)) & 1))
    throw Error("kv", "internal", strfmt("free of slot entry 0x%08x that is not allocated", entry));
  const int cls = ch.kind == SLOTS_V;
  if (ch.used == slots_per_chunk_[cls]) partial_[1 + cls].push_back(c);
  ch.mask[i / 64] &= ~(1ull << (i % 64));
  --ch.used;
  --slots_used_[cls];
  release_if_empty(c);
}

void KVArena::free_entry(uint32_t e) {
  if (e == KV_ENTRY_EMPTY) return;
  if (e & KV_ENTRY_SLOT) free_slot(e);
  else free_page(e);
}

}  // namespace gaacrt
