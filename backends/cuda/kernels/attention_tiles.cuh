// attention_tiles.cuh — the tile loaders of the tensor-core attention kernel (attention_mma.cuh):
// the only code that differs between the BF16 and the GAAC cache (kv/kv_view.h; shared/spec/gaac.md
// "Tile"; the slot layout and lane map of codec/gaac/gaac_format.h).
//
// Every loader leaves a block's K and V as BF16 rows [16][kRow] in shared memory (kRow = kD + 8:
// the 16 spare bytes per row put the 8 rows an ldmatrix reads in 8 different bank groups).
//   * BF16 pages: cp.async straight into the row layout, kStages blocks ahead (issue_bf16).
//   * GAAC slots: cp.async of the slot bytes (fixed part + escape capacity) into a staging buffer,
//     kStages blocks ahead (issue_gaac); when the block's turn comes, the warp decodes them
//     (decode_gaac_block): sub-warps of td/4 lanes (a warp for td = 128, two tiles at once for
//     td = 64) each own one tile, lane li owns group column li % (td/8) of that tile for the whole
//     kernel, so its 8 b3 and 8 b4 bases are loaded once into 4 registers. A raw page in a GAAC
//     cache (the partial newest block, a tile that did not fit its slot) is prefetched into L2 at
//     issue time and copied synchronously at decode time; an empty entry becomes zeros.
#pragma once
#include "codec/gaac/gaac_format.h"
#include "kv/gaac_codec.h"
#include "kv/kv_view.h"
#include "attention_ptx.cuh"
#include "gaac_lane.cuh"

namespace gaacrt::cuda::attn {

constexpr int32_t kStages = 3;  // blocks in the pipeline of each warp (2 in flight while one computes)
constexpr uint32_t kFull = 0xFFFFFFFFu;

template <int kD>
struct TileGeom {
  static constexpr int kRow = kD + 8;                          // bf16 elements per shared row
  static constexpr int kTileBytes = KV_BLOCK_TOKENS * kRow * 2;
  static constexpr int kTd = kD > KV_TILE_MAX_DIM ? KV_TILE_MAX_DIM : kD;  // the usual tile_dim
  // Decode rounds of a warp: 2 * n_half tiles, 32 / (td/4) decoded at once.
  static constexpr int kRounds = kD > 128 ? 4 : (kD > 64 ? 2 : 1);
  // Rounds that decode K alone (the first half when a round is one tile; for td <= 64 a round
  // decodes K and V together).
  static constexpr int kRoundsK = kRounds > 1 ? kRounds / 2 : 1;
  static constexpr int kTiles = kD > KV_TILE_MAX_DIM ? 4 : 2;  // table entries of a block: K and V halves
  // kv.n_half, known at compile time: attention.cu runs a head split in two tiles (n_half = 2,
  // tile_dim 128) on kD = 256 and every other head (n_half = 1) on kD <= 128. A tile's K/V side and
  // half are then constants after unrolling in the loaders, and in the decode where a round is one
  // tile (kD >= 128; below, a round's sub-warps take different tiles): no selects, no indexed
  // constant loads per tile.
  static constexpr int kNHalf = kTiles / 2;
};

// The bytes of a slot the decode can ever read: the fixed part and the escapes up to what a tile
// can ever need (every group raw), which caps a large capacity; staged rounded up to 16 bytes.
__host__ __device__ inline uint32_t gaac_stage_need(int32_t td, uint32_t capacity) {
  return gaac_fixed_bytes(td) + (capacity < gaac_max_escape_bytes(td) ? capacity : gaac_max_escape_bytes(td));
}
__host__ __device__ inline uint32_t gaac_stage_bytes(int32_t td, uint32_t capacity) {
  return (gaac_stage_need(td, capacity) + 15u) & ~15u;
}

// 16-byte chunk c of a [16][td] page -> its place in the row layout, column offset col0.
template <int kD>
__device__ __forceinline__ int chunk_dst(int c, int32_t td, int32_t col0) {
  constexpr int kTd = TileGeom<kD>::kTd, kRow = TileGeom<kD>::kRow;
  const int e = c * 8;
  const int row = td == kTd ? e / kTd : e / td, col = td == kTd ? e % kTd : e % td;
  return row * kRow + col0 + col;
}

// ---- BF16 cache: one block's 2 * n_half pages into K and V rows -------------------------------
// sm_90 (bar != nullptr): each of 16 lanes per tile bulk-copies one row of the page, and lane 0
// arrives on the stage's barrier expecting the bytes; older GPUs, and odd tile widths: cp.async.
// n_parts > 1 (bulk copies only, the barrier initialised for n_parts arrivals): the calling warp
// is part `part` of n_parts issuing the block, its rows r with r % n_parts == part (a bulk copy
// with a per-lane address issues one lane at a time: a quarter of the rows, a quarter of the
// issue), its lane 0 arriving with their bytes.
template <int kD>
__device__ __forceinline__ void issue_bf16(const KVLayerView& kv, const uint32_t (&ent)[TileGeom<kD>::kTiles],
                                           uint16_t* kt, uint16_t* vt, int lane, uint64_t* bar, int part = 0,
                                           int n_parts = 1) {
  constexpr int kT = TileGeom<kD>::kTiles, kRow = TileGeom<kD>::kRow;
  const int32_t td = kv.tile_dim;
  if (bar != nullptr) {
    fence_proxy_async();  // earlier reads of this stage, and zeroed rows, before the copies' writes
    const bool bulk = td % 8 == 0;
    uint32_t bytes = 0;
#pragma unroll
    for (int t = 0; t < kT; ++t)
      bytes += bulk && ent[t] != KV_ENTRY_EMPTY ? KV_BLOCK_TOKENS / n_parts * td * 2 : 0;
    if (lane == 0) mbar_expect_tx(bar, bytes);
    if (bulk) {
      const int r = lane & 15, hi = lane >> 4;
      if (r % n_parts != part) return;
#pragma unroll
      for (int tt = 0; tt < kT / 2; ++tt) {
        const int t = 2 * tt + hi;  // kT 2: K, V; kT 4: K0 K1 (tt 0), V0 V1 (tt 1)
        const uint32_t e = hi ? ent[2 * tt + 1] : ent[2 * tt];
        const int32_t is_v = t >= TileGeom<kD>::kNHalf, half = is_v ? t - TileGeom<kD>::kNHalf : t;
        uint16_t* dst = (is_v ? vt : kt) + r * kRow + half * td;
        if (e != KV_ENTRY_EMPTY)
          bulk_copy(dst, kv.arena + (uint64_t)e * kv.page_bytes + (uint32_t)r * td * 2, (uint32_t)td * 2, bar);
        else  // released page: zeros (never visible)
          for (int c = 0; c < td / 8; ++c) reinterpret_cast<uint4*>(dst)[c] = make_uint4(0, 0, 0, 0);
      }
      return;
    }
  }
#pragma unroll
  for (int32_t t = 0; t < kT; ++t) {
    const int32_t is_v = t >= TileGeom<kD>::kNHalf, half = is_v ? t - TileGeom<kD>::kNHalf : t;
    const uint32_t e = ent[t];
    uint16_t* dst = is_v ? vt : kt;
    const uint8_t* src = kv.arena + (e == KV_ENTRY_EMPTY ? 0 : (uint64_t)e * kv.page_bytes);
    const uint32_t n = e == KV_ENTRY_EMPTY ? 0u : 16u;  // released page: zeros (never visible)
    if (td == TileGeom<kD>::kTd) {
      // The usual tile: chunk c = lane + 32 k lands at row c / (kTd/8), column 8 (c % (kTd/8)),
      // i.e. a fixed start per lane plus 32 / (kTd/8) rows per step: no division, fully unrolled.
      constexpr int kTd = TileGeom<kD>::kTd, kPerRow = kTd / 8, kSteps = 2 * kTd / 32;
      uint16_t* d0 = dst + (lane / kPerRow) * kRow + half * td + 8 * (lane % kPerRow);
      const uint8_t* s0 = src + 16 * lane;
#pragma unroll
      for (int k = 0; k < kSteps; ++k) cp_async16(d0 + k * (32 / kPerRow) * kRow, s0 + 512 * k, n);
    } else if (td % 8 == 0) {
      for (int c = lane; c < 2 * td; c += 32) cp_async16(dst + chunk_dst<kD>(c, td, half * td), src + 16 * c, n);
    } else {  // odd head dims: a plain synchronous copy
      const uint16_t* p = reinterpret_cast<const uint16_t*>(src);
      for (int x = lane; x < KV_BLOCK_TOKENS * td; x += 32)
        dst[(x / td) * kRow + half * td + x % td] = e == KV_ENTRY_EMPTY ? 0 : p[x];
    }
  }
}

// A block's pages of the usual tile (td = kTd) by cp.async, spread over kNT threads: thread tid
// issues chunks tid, tid + kNT, ... of each page. Rows at or past n_valid (the newest block's
// rows past the last token, never written) are zero-filled by the copy itself (source size 0),
// so no pass has to zero them after every thread's copies have landed. The chunks per thread are
// a constant (two at head size 128 for a thread block's 128 threads), so the loop unrolls into
// straight copies from offsets fixed per thread: with a run-time thread count it was a loop with
// a remainder, ~140 instructions a warp per two-block step of the wide prefill and a quarter of
// its stall samples at 32K (H200, Nsight Compute, the seventeenth session).
template <int kD, int kNT>
__device__ __forceinline__ void issue_bf16_spread(const KVLayerView& kv, const uint32_t (&ent)[TileGeom<kD>::kTiles],
                                                  uint16_t* kt, uint16_t* vt, int tid, int32_t n_valid) {
  constexpr int kT = TileGeom<kD>::kTiles, kRow = TileGeom<kD>::kRow, kTd = TileGeom<kD>::kTd, kPerRow = kTd / 8;
  constexpr int kChunks = KV_BLOCK_TOKENS * kPerRow, kPer = (kChunks + kNT - 1) / kNT;
#pragma unroll
  for (int32_t t = 0; t < kT; ++t) {
    const int32_t is_v = t >= TileGeom<kD>::kNHalf, half = is_v ? t - TileGeom<kD>::kNHalf : t;
    const uint32_t e = ent[t];
    uint16_t* dst = (is_v ? vt : kt) + half * kTd;
    const uint8_t* src = kv.arena + (e == KV_ENTRY_EMPTY ? 0 : (uint64_t)e * kv.page_bytes);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int c = tid + kNT * j;
      if (kChunks % kNT != 0 && c >= kChunks) break;
      const int row = c / kPerRow;  // (a power of two)
      cp_async16(dst + row * kRow + 8 * (c % kPerRow), src + 16 * c, e == KV_ENTRY_EMPTY || row >= n_valid ? 0u : 16u);
    }
  }
}

// The wgmma step tile (attention_wide.cuh, head size 128): a step of kN blocks' K, then its V,
// wg_tile_bytes(kN) each, as 16-byte chunks in column order — the chunk of key r of the step's
// 16 kN (block i's row r - 16 i) and channels 8c .. 8c+7 at byte wg_col_bytes(kN) c + 16 r — so
// that 8 keys x 8 channels are one 128-byte core matrix, the layout wgmma reads without swizzle
// (wgmma.cuh), for q·k (K-major) and p·v (MN-major) alike. Block i of the step goes to rows 16 i
// ..; each of the 128 threads copies two chunks of each page, lanes running down a column's 16
// rows (a warp's stores fill two runs of 256 contiguous bytes; its loads, whole 32-byte sectors).
// Rows at or past n_valid and released pages (a step's blocks past the stream's end) are
// zero-filled by the copies, as in issue_bf16_spread.
__host__ __device__ constexpr uint32_t wg_col_bytes(int kN) { return 16u * KV_BLOCK_TOKENS * kN; }
__host__ __device__ constexpr uint32_t wg_tile_bytes(int kN) { return 16 * wg_col_bytes(kN); }  // 128 channels
template <int kD, int kNT, int kN = 2>
__device__ __forceinline__ void issue_bf16_step_tile(const KVLayerView& kv, const uint32_t (&ent)[TileGeom<kD>::kTiles],
                                                     uint8_t* tile, int i, int tid, int32_t n_valid) {
  static_assert(kD == 128 && TileGeom<kD>::kTiles == 2 && kNT == 128, "head size 128, one tile a side, 128 threads");
  constexpr uint32_t kCol = wg_col_bytes(kN);
  // This thread's chunks: row tid % 16, columns tid / 16 and tid / 16 + 8 — fixed offsets in the
  // page (+128 bytes for the second) and in the tile (+8 columns).
  const int row = tid & 15, col = tid >> 4;
  const uint32_t src_off = 256 * row + 16 * col;
  uint8_t* dst = tile + 256 * i + kCol * col + 16 * row;
#pragma unroll
  for (int t = 0; t < 2; ++t) {  // K, V
    const uint32_t e = ent[t];
    const uint8_t* src = kv.arena + (e == KV_ENTRY_EMPTY ? 0 : (uint64_t)e * kv.page_bytes) + src_off;
    const uint32_t n = e == KV_ENTRY_EMPTY || row >= n_valid ? 0u : 16u;
    cp_async16(dst + t * wg_tile_bytes(kN), src, n);
    cp_async16(dst + t * wg_tile_bytes(kN) + 8 * kCol, src + 128, n);
  }
}

// ---- GAAC cache ------------------------------------------------------------------------------
// A layer's slot constants, K's and V's, one word each, computed on the host (gaac_stage_word) and
// read from the kernel's parameters (recomputed per tile, global loads of the capacities
// included, they cost ~200 instructions per block; held in registers, they spilled): bits 0-15
// the staged bytes (fixed part + escapes, a 16-byte multiple, gaac_stage_bytes), 16-30 the escape
// capacity, 31 set when every slot of the layer starts 16-byte aligned and its readable bytes
// are exactly the staged bytes (then slots copy in 16-byte pieces or in bulk). Two words
// selected, not an array indexed by is_v: is_v is a run-time value.
struct GaacStaging {
  uint32_t k, v;
  __host__ __device__ uint32_t word(int is_v) const { return is_v ? v : k; }
  __host__ __device__ uint32_t staged(int is_v) const { return word(is_v) & 0xFFFFu; }
  __host__ __device__ uint32_t capacity(int is_v) const { return (word(is_v) >> 16) & 0x7FFFu; }
  __host__ __device__ bool whole(int is_v) const { return (word(is_v) >> 31) != 0; }
};
// The word of a slot of `slot_bytes` (fixed part + capacity) at tile dim td; arena and chunk_bytes
// as in KVLayerView (a slot starts at arena + chunk * chunk_bytes + sub * slot_bytes). The
// capacity is slot_bytes less the fixed part of the BF16-element layout (codec/gaac/gaac_format.h
// gaac_slot_bytes; GaacKVLayer::capacity holds the same number): KVFormat::GAAC only, the one GAAC
// format these kernels decode (attention.cu turns the FP8 ones away).
inline uint32_t gaac_stage_word(int32_t td, uint64_t slot_bytes, const uint8_t* arena, uint64_t chunk_bytes) {
  const uint32_t fixed = gaac_fixed_bytes(td);
  const uint32_t cap = slot_bytes > fixed ? (uint32_t)(slot_bytes - fixed) : 0u;
  const uint32_t nb = gaac_stage_bytes(td, cap);  // < 2^16 for every tile dim (at most 128)
  const uint32_t need = gaac_stage_need(td, cap);
  const bool aligned = ((uintptr_t)arena & 15u) == 0 && chunk_bytes % 16 == 0 && slot_bytes % 16 == 0;
  return nb | (cap < 0x7FFFu ? cap : 0x7FFFu) << 16 | (aligned && need == nb ? 1u << 31 : 0u);
}

// Issue: the slot bytes of each of the block's tiles into staging[is_v] + half * half_bytes; on
// sm_90 (bar != nullptr) one bulk copy per slot by lane 0, counted on the stage's barrier.
template <int kD>
__device__ __forceinline__ void issue_gaac(const KVLayerView& kv, const GaacStaging& gs,
                                           const uint32_t (&ent)[TileGeom<kD>::kTiles], uint8_t* stage_k,
                                           uint8_t* stage_v, uint32_t half_bytes, int lane, uint64_t* bar) {
  constexpr int kT = TileGeom<kD>::kTiles;
  const int32_t td = kv.tile_dim;
  if (bar != nullptr) {
    // The usual block: every tile a slot of a layer whose slots copy whole. One straight path, and
    // no proxy fence: a layer's staging is written by bulk copies only (raw pages and empty tiles
    // never land there), and the generic proxy only reads it, each read consumed by the decode
    // before the __syncwarp that precedes this issue — there is no generic write to order.
    bool usual = gs.whole(0) && gs.whole(1);
#pragma unroll
    for (int t = 0; t < kT; ++t) usual = usual && kv_entry_is_slot(ent[t]);
    if (usual) {
      if (lane == 0) {
        uint32_t bytes = 0;
#pragma unroll
        for (int t = 0; t < kT; ++t) bytes += gs.staged(t >= TileGeom<kD>::kNHalf);
        mbar_expect_tx(bar, bytes);
#pragma unroll
        for (int t = 0; t < kT; ++t) {
          const int32_t is_v = t >= TileGeom<kD>::kNHalf, half = is_v ? t - TileGeom<kD>::kNHalf : t;
          bulk_copy((is_v ? stage_v : stage_k) + half * half_bytes, kv_entry_ptr(kv, ent[t], is_v), gs.staged(is_v),
                    bar);
        }
      }
      return;
    }
    fence_proxy_async();
    uint32_t bytes = 0;
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      const int32_t is_v = t >= TileGeom<kD>::kNHalf;
      if (kv_entry_is_slot(ent[t]) && gs.whole(is_v)) bytes += gs.staged(is_v);
    }
    if (lane == 0) mbar_expect_tx(bar, bytes);
  }
#pragma unroll
  for (int32_t t = 0; t < kT; ++t) {
    const int32_t is_v = t >= TileGeom<kD>::kNHalf, half = is_v ? t - TileGeom<kD>::kNHalf : t;
    const uint32_t e = ent[t];
    if (e == KV_ENTRY_EMPTY) continue;
    const uint8_t* src = kv_entry_ptr(kv, e, is_v);
    if (!kv_entry_is_slot(e)) {  // raw page: warm L2 now, copied at decode time
      if (lane * 128 < KV_BLOCK_TOKENS * td * 2) prefetch_l2(src + lane * 128);
      continue;
    }
    uint8_t* dst = (is_v ? stage_v : stage_k) + half * half_bytes;
    if (gs.whole(is_v)) {
      const uint32_t nb = gs.staged(is_v);
      if (bar != nullptr) {
        if (lane == 0) bulk_copy(dst, src, nb, bar);
        continue;
      }
      // At most (fixed + every escape) / 16 chunks: a fixed, unrolled, predicated loop.
      constexpr uint32_t kMaxSteps = (GAAC_FIXED_BYTES_128 + 10u * GAAC_MAX_TILE_DIM + 16u * 32u - 1u) / (16u * 32u);
      const uint32_t nc = nb / 16;
#pragma unroll
      for (uint32_t k = 0; k < kMaxSteps; ++k) {
        const uint32_t c = lane + 32u * k;
        if (c < nc) cp_async16(dst + 16 * c, src + 16 * c, 16);
      }
    } else {  // a slot size that breaks 16-byte alignment: plain byte copy of exactly the slot
      const uint32_t need = gaac_stage_need(td, gs.capacity(is_v));
      for (uint32_t x = lane; x < need; x += 32) dst[x] = src[x];
    }
  }
}

// Copies (or zeroes, src == nullptr) a raw [16][td] page into rows at column col0; lanes li of nl;
// returns when the rows are written. By cp.async, then a wait for all of this thread's copies: one
// trip to L2 (where issue time put the page) for the whole page, and no registers. (Plain loads
// and stores ran the lane's 8 trips in series — the compiler cannot move a global load above a
// shared store through generic pointers — for a GAAC cache's newest block in every step or an E8
// window block: a GAAC launch at a short context took 18.5 µs against 15.7 now, H100. Loads
// batched into registers spilled in the GAAC kernel.) The wait also completes any cp.async this
// thread has in flight for later blocks (slots of a layer that does not copy whole): early, never
// wrong — the pipeline's cp.async.wait_group counts only what is still pending.
template <int kD>
__device__ __forceinline__ void copy_page_sync(const uint8_t* src, int32_t td, int32_t col0, uint16_t* dst, int li,
                                               int nl) {
  const int n = 2 * td;  // 16-byte chunks
  for (int c = li; c < n; c += nl) {
    uint16_t* d = dst + chunk_dst<kD>(c, td, col0);
    if (src != nullptr) cp_async16(d, src + 16 * c, 16);
    else *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
  }
  cp_async_wait_all();
}

__device__ __forceinline__ uint32_t lanemask_lt() {
#if defined(GAACRT_CUDA_EMULATION)
  return (1u << gaacrt_cuda_emu::lane_id()) - 1u;
#else
  uint32_t m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
#endif
}

// The sum of a per-lane count c < 2^bits (bits <= 4, warp-uniform) over the lanes of the segment
// (mask seg) before this one (lt: seg & lanemask_lt), and over the whole segment: a ballot per bit.
__device__ __forceinline__ void segment_prefix(uint32_t c, uint32_t seg, uint32_t lt, int bits, uint32_t& before,
                                               uint32_t& total) {
  before = total = 0;
#pragma unroll
  for (int bit = 0; bit < 4; ++bit) {
    if (bit >= bits) break;  // warp-uniform
    const uint32_t B = __ballot_sync(kFull, (c & (1u << bit)) != 0u) & seg;
    before += (uint32_t)__popc(B & lt) << bit;
    total += (uint32_t)__popc(B) << bit;
  }
}

// Lane li's bases (8 b3 and 8 b4 bytes) for its group column of tile column (kvh, is_v, half) of
// the layer whose GAAC state (kv.codec) is st; nothing loaded where the layer has none (before
// calibration a GAAC cache has no slots and no bases: null pointers).
__device__ __forceinline__ void gaac_column_bases(const KVLayerView& kv, const GaacKVLayer* st, int32_t kvh,
                                                  int32_t is_v, int32_t half, int li, GaacU32x2& b3, GaacU32x2& b4) {
  if (st->bases[is_v][0] == nullptr || st->bases[is_v][1] == nullptr) return;
  const int32_t td = kv.tile_dim;
  const int64_t off = (int64_t)kvh * (is_v ? kv.head_dim_v : kv.head_dim_k) + half * td + 8 * (li % gaac_group_cols(td));
  b3 = GaacU32x2{gaac_ld32(st->bases[is_v][0] + off), gaac_ld32(st->bases[is_v][0] + off + 4)};
  b4 = GaacU32x2{gaac_ld32(st->bases[is_v][1] + off), gaac_ld32(st->bases[is_v][1] + off + 4)};
}

// A staged slot's tags for this lane (`slot`: the lane decodes one; else no tags) and where its X
// bytes (xo) and R records (n_x + 4 rc: after the tile's n_x X bytes, rc records of 4 bytes before
// this lane's) start in the escape area, counted over the lanes of its tile: sub-warp `sub` of nlp
// lanes (a power of two; kWholeWarp: the whole warp, known at compile time: no masking of the
// ballots); bad: a reserved tag in the tile, or escapes beyond the capacity (only where `slot`). A lane mostly has 0-3 X bytes (about a tenth of the groups are 4-bit) and at most
// one R record (raw groups are ~0.2%; a tile has one in about half the tiles): the high bits'
// ballots run only when some lane of the warp needs them.
struct GaacLaneEscapes {
  uint32_t tags, xo, n_x, rc;
  bool bad;
};
template <bool kWholeWarp>
__device__ __forceinline__ GaacLaneEscapes gaac_lane_escapes(const uint8_t* stg, int32_t td, int li, bool slot,
                                                             int nlp, int sub, uint32_t capacity) {
  GaacLaneEscapes r;
  r.tags = slot ? gaac_lane_tags(stg, td, li) : 0u;
  const GaacTagMasks m = gaac_tag_masks(r.tags);
  const uint32_t seg = kWholeWarp ? kFull : (nlp == 32 ? kFull : ((1u << nlp) - 1u)) << (sub * nlp);
  const bool seg_bad = kWholeWarp ? __any_sync(kFull, m.bad != 0) : (__ballot_sync(kFull, m.bad != 0) & seg) != 0;
  // X bytes and R records before each lane of the segment, and the segment's totals, by one
  // ballot per bit of the lane counts (0..8) — independent votes, not a shuffle chain.
  const uint32_t nx = __popc(m.x), nr = __popc(m.raw), lt = seg & lanemask_lt();
  uint32_t n_raw = 0;
  r.rc = 0;
  segment_prefix(nx, seg, lt, __any_sync(kFull, nx > 3u) ? 4 : 2, r.xo, r.n_x);
  if (__any_sync(kFull, nr != 0u)) segment_prefix(nr, seg, lt, __any_sync(kFull, nr > 1u) ? 4 : 1, r.rc, n_raw);
  r.bad = slot && (seg_bad || r.n_x + 4u * n_raw > capacity);
  return r;
}

// Per-lane decode assignment, fixed for the kernel: sub-warp `sub` of nlp (a power of two >= the
// td/4 decoders) lanes, lane li in it; round rd decodes tile rd * nsub + sub (K halves, then V).
struct GaacLanes {
  int nl, nlp, nsub, sub, li, rounds;
};
__device__ __forceinline__ GaacLanes gaac_lanes_of(int32_t td, int32_t n_half, int lane) {
  GaacLanes g;
  g.nl = gaac_lanes(td);
  g.nlp = 1;
  while (g.nlp < g.nl) g.nlp <<= 1;
  g.nsub = 32 / g.nlp;
  g.sub = lane / g.nlp;
  g.li = lane % g.nlp;
  g.rounds = (2 * n_half + g.nsub - 1) / g.nsub;
  return g;
}

// Decodes rounds kR0 .. kR1-1 of one block (2 * n_half tiles, whose table entries are ents[0 ..])
// from staging into K / V rows. Returns false (warp-uniform)
// when a slot fails validation (reserved tag, escapes beyond the capacity): the caller records it
// and skips the block. Rows of every tile are written (zeros for an empty entry).
template <int kD, int kR0, int kR1>
__device__ __forceinline__ bool decode_gaac_block(const KVLayerView& kv, const GaacStaging& gs,
                                                  const uint32_t* ents, const uint8_t* stage_k, const uint8_t* stage_v,
                                                  uint32_t half_bytes, const GaacLanes& L,
                                                  const GaacU32x2 (&b3)[TileGeom<kD>::kRounds],
                                                  const GaacU32x2 (&b4)[TileGeom<kD>::kRounds], uint16_t* kt,
                                                  uint16_t* vt) {
  constexpr int kRow = TileGeom<kD>::kRow;
  const int32_t td = kv.tile_dim, nh = TileGeom<kD>::kNHalf;
  bool ok = true;
#pragma unroll
  for (int rd = kR0; rd < kR1; ++rd) {
    if (rd >= L.rounds) break;  // warp-uniform
    const int ti = rd * L.nsub + L.sub;
    const bool active = ti < 2 * nh && L.li < L.nl;
    const int32_t is_v = ti >= nh, half = is_v ? ti - nh : ti;
    const uint32_t e = active ? ents[ti] : KV_ENTRY_EMPTY;
    const bool slot = active && kv_entry_is_slot(e);
    const uint8_t* stg = (is_v ? stage_v : stage_k) + half * half_bytes;
    // (A tile of more than 64 columns, kD >= 128 in attention.cu, has more than 16 decoders: the
    // whole warp.)
    const GaacLaneEscapes x = gaac_lane_escapes<kD >= 128>(stg, td, L.li, slot, L.nlp, L.sub, gs.capacity(is_v));
    if (__any_sync(kFull, x.bad)) ok = false;
    uint16_t* dst = is_v ? vt : kt;
    if (slot && !x.bad) {
      const GaacU32x2 w3 = b3[rd], w4 = b4[rd];
      decode_gaac_lane(stg, td, L.li, x.tags, x.xo, x.n_x + 4u * x.rc, w3, w4, dst + half * td, kRow);
    } else if (active && !slot) {  // raw page (newest block, or a tile that did not fit) or empty
      copy_page_sync<kD>(e == KV_ENTRY_EMPTY ? nullptr : kv.arena + (uint64_t)e * kv.page_bytes, td, half * td,
                         dst, L.li, L.nl);
    }
  }
  return ok;
}

}  // namespace gaacrt::cuda::attn
