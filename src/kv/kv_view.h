// kv_view.h — what the backend's KV ops see of the cache: plain structs of device pointers and
// sizes, identical on CPU, CUDA and Metal (no std::, so kernels can take them by value).
//
// Storage (DESIGN.md "KV cache"): pages of 16 tokens per (layer, kv-head, K|V, 128-channel
// half). A *tile* is one such 16-token × tile_dim piece. The block table has one 32-bit entry per
// tile saying where it lives:
//   KV_ENTRY_EMPTY          not allocated (never written, or released by a sliding window)
//   index < KV_ENTRY_SLOT   a raw BF16 page: pages + index * page_bytes, laid out [16][tile_dim]
//   KV_ENTRY_SLOT | index   a compressed slot of the cache format: slots + index * slot_bytes
// A sequence's table for one layer is [n_head_kv][2 (K, V)][n_half][max_blocks].
#pragma once
#include "common/portable.h"

namespace gaacrt {

constexpr int32_t KV_BLOCK_TOKENS = 16;
constexpr int32_t KV_TILE_MAX_DIM = 128;
constexpr uint32_t KV_ENTRY_EMPTY = 0xFFFFFFFFu;
constexpr uint32_t KV_ENTRY_SLOT = 0x80000000u;
constexpr uint32_t KV_CHUNK_PAGES = 32;
constexpr uint32_t KV_SLOT_SUB_BITS = 8;
constexpr uint32_t KV_SLOT_SUB_MASK = (1u << KV_SLOT_SUB_BITS) - 1u;
constexpr uint32_t KV_SLOTS_PER_CHUNK_MAX = 1u << KV_SLOT_SUB_BITS;

enum class KVFormat : int32_t { BF16 = 0, GAAC = 1, E8 = 2, Q8 = 3, KIVI2 = 4, FP8_E4M3_GAAC = 5, FP8_E5M2_GAAC = 6 };

// One layer of the cache pool.
struct KVLayerView {
  KVFormat format;
  int32_t layer;
  int32_t n_head_kv;
  int32_t head_dim_k, head_dim_v;
  int32_t tile_dim;        // min(head_dim, 128)
  int32_t n_half;          // head_dim / tile_dim (2 for a 256-dim head)
  int32_t max_blocks;      // block-table row length
  GAACRT_DEVICE uint8_t* arena;  // raw BF16 pages and compressed slots
  uint64_t page_bytes;     // KV_BLOCK_TOKENS * tile_dim * 2
  uint64_t chunk_bytes;    // KV_CHUNK_PAGES * page_bytes
  uint64_t slot_bytes[2];  // compressed slot of a K / V tile (0: the format has none)
  const GAACRT_DEVICE void* codec;  // format-specific per-layer state (GAAC bases, E8 rotation, ...) or null
};

// Address of a tile's bytes from its block-table entry (raw page or slot).
GAACRT_HD bool kv_entry_is_slot(uint32_t e) { return (e & KV_ENTRY_SLOT) != 0 && e != KV_ENTRY_EMPTY; }
GAACRT_HD GAACRT_DEVICE uint8_t* kv_entry_ptr(const KVLayerView& kv, uint32_t e, int32_t is_v) {
  if (!(e & KV_ENTRY_SLOT)) return kv.arena + (uint64_t)e * kv.page_bytes;
  const uint32_t chunk = (e & ~KV_ENTRY_SLOT) >> KV_SLOT_SUB_BITS, sub = e & KV_SLOT_SUB_MASK;
  return kv.arena + (uint64_t)chunk * kv.chunk_bytes + (uint64_t)sub * kv.slot_bytes[is_v];
}

// Index of a tile's entry in one sequence's per-layer block table.
GAACRT_HD int64_t kv_entry_index(const KVLayerView& kv, int32_t head, int32_t is_v, int32_t half, int32_t block) {
  return (((int64_t)head * 2 + is_v) * kv.n_half + half) * kv.max_blocks + block;
}

// Where token t of a batch goes: its sequence's table and its position.
struct KVTokenSlot {
  const GAACRT_DEVICE uint32_t* table;  // the sequence's table for this layer
  int32_t pos;
};

// One tile to compress (kv_finalize): the raw page it fills now and the slot reserved for it.
struct KVFinalizeJob {
  int32_t head, is_v, half, block;
  uint32_t raw_page;       // source: the tile's raw page
  uint32_t slot;           // destination: a slot entry reserved by the host
  int32_t fits;            // out: 1 when the tile was encoded into the slot
  int32_t escape_bytes;    // out: bytes of format-specific overflow data used (GAAC escapes)
};

struct AttentionArgs {
  int32_t n_head;          // query heads (a multiple of n_head_kv)
  float scale;             // applied to q·k
  int32_t sliding_window;  // 0 = none; key at j is visible to a query at p iff p - j < window
  float softcap;           // 0 = none
  // An upper bound on the n_q of the batch's sequences (the model's forward passes the largest
  // n_q; the batch's token count would do; 0 = unknown). The sequences live in device memory, so this is what lets a GPU backend give a
  // prefill-sized sequence enough thread blocks without reading them back. It must be a true
  // bound: the CUDA backend shapes a launch it says is decode-only (every sequence at most 16
  // query rows) differently, and a longer sequence there would lose rows.
  int32_t max_q = 0;
  // An upper bound on the batch's sequences' lengths, pos0 + n_q (0 = unknown). A backend may size
  // per-launch scratch by it (CUDA's GAAC prefill through BF16 pages: attention_gaac_expand.cu,
  // which needs it). A step recorded as a graph and replayed at later positions passes 0.
  int32_t max_len = 0;
};

// One sequence's part of a batch: query rows [q_begin, q_begin + n_q) at positions
// pos0 .. pos0 + n_q - 1; the cache holds its tokens 0 .. pos0 + n_q - 1 (this step's included).
struct AttnSeq {
  const GAACRT_DEVICE uint32_t* table;
  int32_t q_begin, n_q;
  int32_t pos0;
};

}  // namespace gaacrt
