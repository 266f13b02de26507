// kv_arena.h — the one KV arena: fixed-size chunks that hold either raw BF16 pages or
// compressed slots of one size class (DESIGN.md "KV cache": two physical classes, one arena).
//
//   arena = [chunk 0][chunk 1] ... each chunk = KV_CHUNK_PAGES pages of page_bytes
//   a page chunk holds KV_CHUNK_PAGES raw pages; a slot chunk (a "slab") holds
//   floor(chunk_bytes / slot_bytes) slots (at most KV_SLOTS_PER_CHUNK_MAX) of one class.
// Block-table entries (kv_view.h) address a page by its index and a slot by (chunk, sub-index),
// so a kernel finds either with a multiply and an add. A chunk returns to the free list when its
// last page or slot is freed. Host-side bookkeeping only; the bytes live in backend memory.
#pragma once
#include <cstdint>
#include <vector>

#include "kv_view.h"

namespace gaacrt {

class KVArena {
 public:
  KVArena(uint64_t n_chunks, uint64_t page_bytes);
  // Slot classes: 0 = keys, 1 = values (their slots may differ in size). 0 bytes: no class.
  void set_slot_bytes(int cls, uint64_t bytes);
  uint64_t slot_bytes(int cls) const { return slot_bytes_[cls]; }
  uint32_t slots_per_chunk(int cls) const { return slots_per_chunk_[cls]; }

  uint64_t n_chunks() const { return chunks_.size(); }
  uint64_t page_bytes() const { return page_bytes_; }
  uint64_t chunk_bytes() const { return page_bytes_ * KV_CHUNK_PAGES; }

  // Raw pages that can still be allocated (free chunks count fully).
  uint64_t pages_available() const { return free_chunks_.size() * KV_CHUNK_PAGES + partial_free_pages_; }
  uint32_t alloc_page();                 // KV_ENTRY_EMPTY when none is left
  void free_page(uint32_t page);
  uint32_t alloc_slot(int cls);          // a slot entry (KV_ENTRY_SLOT | ...), or KV_ENTRY_EMPTY
  void free_slot(uint32_t entry);
  void free_entry(uint32_t entry);       // either kind; EMPTY is ignored

  uint64_t pages_used() const { return pages_used_; }
  uint64_t slots_used(int cls) const { return slots_used_[cls]; }
  uint64_t chunks_used() const { return chunks_.size() - free_chunks_.size(); }

 private:
  enum Kind : uint8_t { FREE, PAGES, SLOTS_K, SLOTS_V };
  struct Chunk {
    Kind kind = FREE;
    uint32_t used = 0;                   // pages or slots in use
    uint64_t mask[4] = {0, 0, 0, 0};     // bit i: unit i in use (at most 256 units)
  };
  uint32_t take_chunk(Kind k);
  void release_if_empty(uint32_t c);
  static int first_zero(const Chunk& ch, uint32_t n_units);

  uint64_t page_bytes_;
  uint64_t slot_bytes_[2] = {0, 0};
  uint32_t slots_per_chunk_[2] = {0, 0};
  std::vector<Chunk> chunks_;
  std::vector<uint32_t> free_chunks_;                 // stack
  std::vector<uint32_t> partial_[3];                  // chunks with free units: pages, K slots, V slots
  uint64_t partial_free_pages_ = 0;
  uint64_t pages_used_ = 0, slots_used_[2] = {0, 0};
};

}  // namespace gaacrt
