// attention_mma.cuh — attention over the paged KV cache on tensor cores, one kernel template for
// the BF16 and the GAAC cache (kv/kv_view.h; shared/spec/gaac.md "Measured on the H200"; DESIGN.md
// "Ops, graphs and the attention op"). The CPU reference is backends/cpu/attention.cpp.
//
// The unit of work is an M-tile: 4 query rows (row = (query token, head of the GQA group)) of one
// kv-head. q·k and p·v are mma.sync m16n8k16 (bf16 x bf16 -> fp32) with a block's 16 keys (or 16
// value channels) in the A operand's rows and the 4 rows' fp32 queries and weights in the B
// operand's 8 columns, two bf16 parts each (attention_block.cuh, "keys in the mma's rows";
// attention_ptx.cuh says why parts), so a K/V tile is read once from shared memory for all 4
// heads. A lane's scores and accumulators then cover a single query row (lane % 4), its two
// parts in neighbouring accumulators: no shuffle to sum them.
//
// Warps are independent: each streams its own blocks through a pipeline of stage_count() blocks in
// its own shared buffers (no __syncthreads in the loop) and keeps an online softmax (m, l, O).
//   * decode-sized sequences (n_q * G <= 16 rows, e.g. one token of a GQA group; the split and the
//     merges are attention_split_k.cuh's, shared with the E8 kernel): the visible blocks
//     are cut into chunks of 4 blocks aligned to absolute block indices, the chunks into n_split
//     contiguous ranges, one per thread block (split-K); inside a thread block the warps take
//     M-tiles (ceil(rows / 4)) and deal the blocks of the range round-robin (4 warps for a group
//     of <= 4 heads: each tile is loaded and decoded once for the whole group). The warps' states
//     are merged in shared memory, the thread block writes its partial state, and the last thread
//     block of its (sequence, kv-head) to arrive (an atomic counter) merges the partials (O in
//     split order, the softmax sums by a fixed shuffle tree) and writes the output: no second
//     kernel. Splits that hold no keys (a short context in a session sized for a long one) leave
//     at once and are not counted.
//   * prefill-sized sequences: thread block x takes row groups x, x + gridDim.x, ... and writes
//     their rows itself (the host sizes gridDim.x from AttentionArgs::max_q, at least n_split).
//     Launches with such a sequence run the kShared kernel (GAACRT_CUDA_PREFILL_SHARED=0: the
//     per-warp one), whose four warps share one stream of blocks, each copied, and GAAC's
//     decoded, once for the thread block (attention_prefill.cuh): row groups of 64, 16 rows per
//     warp, up to head size 128 (attention_wide.cuh), else of 16, one M-tile per warp over that
//     M-tile's whole visible range (run_rows_shared).
// n_split depends only on the batch's number of sequences and the GPU, and every order of
// summation (blocks in a warp, warps in a block, splits) is fixed by lengths alone, so a GAAC
// cache (whose loader rebuilds the very BF16 bits) gives bit-identical results to a BF16 cache.
#pragma once
#include <cmath>

#include "../cuda_backend.h"
#include "../cuda_common.h"
#include "attention_args.cuh"
#include "attention_split_k.cuh"
#include "attention_block.cuh"
#include "attention_prefill.cuh"
#include "attention_tiles.cuh"
#include "attention_wide.cuh"
#include "entry_stream.cuh"

namespace gaacrt::cuda::attn {


// A warp's shared bytes: kS stages of K and V (BF16 tiles, or GAAC slot staging), for GAAC the
// decoded tiles (K and V, or one that V reuses: decoded_tile_count), then the stages' barriers (sm_90
// bulk copies) and the ring of the in-flight blocks' table entries.
template <int kD, bool kGaac, int kB>
__device__ __forceinline__ uint64_t* stage_bars(uint8_t* wbase, uint32_t kv_bytes) {
  const uint32_t decoded = kGaac ? decoded_tile_count(kB) * TileGeom<kD>::kTileBytes : 0;  // GAAC's decoded tiles
  return reinterpret_cast<uint64_t*>(wbase + stage_count(kD, kB) * 2 * kv_bytes + decoded);
}
__host__ __device__ constexpr uint32_t entry_ring_bytes(int kD, int blocks) {
  const uint32_t stages = stage_count(kD, blocks);
  return (stages * 8 + stages * (kD > KV_TILE_MAX_DIM ? 4 : 2) * 4 + 15) & ~15u;  // keeps warps 16-aligned
}

// This lane's GAAC bases (gaac_lanes_of: the tiles of its rounds, its group column): two
// dependent loads (the layer's base pointers, then the bytes), so the decode path makes them
// after its first copies are out (run_rows), not ahead of them and of the table entries, and
// before its wait for the previous kernel (they are calibration, not that kernel's output).
template <int kD>
__device__ __forceinline__ void load_gaac_bases(const KernelArgs& P, int32_t kvh, const GaacLanes& GL,
                                                GaacU32x2 (&b3)[TileGeom<kD>::kRounds],
                                                GaacU32x2 (&b4)[TileGeom<kD>::kRounds]) {
  const KVLayerView& kv = P.kv;
  const GaacKVLayer* st = static_cast<const GaacKVLayer*>(kv.codec);
#pragma unroll
  for (int rd = 0; rd < TileGeom<kD>::kRounds; ++rd) {
    const int ti = rd * GL.nsub + GL.sub;
    const int32_t is_v = ti >= kv.n_half, half = is_v ? ti - kv.n_half : ti;
    if (rd < GL.rounds && ti < 2 * kv.n_half && GL.li < GL.nl && P.half_bytes != 0)
      gaac_column_bases(kv, st, kvh, is_v, half, GL.li, b3[rd], b4[rd]);
  }
}

// One warp, one M-tile (rows r0 .. r0+3 of sequence s), blocks b_first, b_first + b_step, ...
// below b_end, in attention_block.cuh's key-row layout: leaves this lane's row state (row r0 +
// lane % 4; O^T's parts not yet summed) in o, m, l.
// pdl_wait: this warp waits for the previous kernel (PDL) here, after issuing the copies of its
// first blocks that lie before the first block this step writes (pos0 / 16): the sequence, the
// table and those blocks were written before the step began, so the copies overlap the previous
// kernel (rope_store, which writes q and the new token's K/V) instead of following it. The
// decode path (pdl_wait) also loads GAAC's bases here, after those copies and before the wait
// (load_gaac_bases); the prefill paths pass them loaded.
template <int kD, bool kGaac, int kB>
__device__ __forceinline__ void run_rows(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t r0,
                                         int32_t n_rows, int32_t b_first, int32_t b_end, int32_t b_step,
                                         bool pdl_wait, uint8_t* wbase, const GaacLanes& GL,
                                         GaacU32x2 (&b3)[TileGeom<kD>::kRounds],
                                         GaacU32x2 (&b4)[TileGeom<kD>::kRounds], float (&o)[kD / 16][4],
                                         float& m, float& l) {
  constexpr int kTileBytes = TileGeom<kD>::kTileBytes, kS = stage_count(kD, kB), kT = TileGeom<kD>::kTiles;
  const KVLayerView& kv = P.kv;
  const int lane = threadIdx.x & 31;
  const int32_t dk = kv.head_dim_k;
  const TileRow tr = query_row(P, s, kvh, r0 + (lane & 3), n_rows);  // this lane's softmax row
  const int32_t pos = tr.pos, lo = tr.lo, len = s.pos0 + s.n_q;  // len: tokens in the cache

  reset_row_state(o, m, l);

  const uint32_t kv_bytes = kGaac ? kv.n_half * P.half_bytes : (uint32_t)kTileBytes;  // one stage's K (or V)
  uint8_t* dec = wbase + kS * 2 * kv_bytes;  // GAAC: decoded K, V (or one tile for both, kB = 3)
  uint64_t* bars = stage_bars<kD, kGaac, kB>(wbase, kv_bytes);  // [kS] bulk-copy barriers (sm_90)
  uint32_t* ents = reinterpret_cast<uint32_t*>(bars + kS);   // [kS][kTiles] entries of the blocks in flight
  constexpr bool kBulk = GAACRT_BULK_COPY;
  if (kBulk) {
    if (lane == 0)
#pragma unroll
      for (int p = 0; p < kS; ++p) mbar_init(bars + p);
    fence_mbar_init();
    __syncwarp();
  }
  const GaacStaging& gs = P.gaac_stage;
  const int32_t n_iter = b_end > b_first ? (b_end - b_first + b_step - 1) / b_step : 0;
  // Bulk copies for BF16 pages only when this warp streams many blocks: a page is 16 rows copied
  // one per lane, and the bulk copy's operands must be uniform, so the 32 copies of a block issue
  // one lane at a time (~290 instructions against cp.async's ~30). Off the L1 miss path they pay
  // at long contexts; a short range (a short context) is latency, and cp.async issues faster.
  // GAAC's slots are one bulk copy each (lane 0), when the layer's slots copy whole: always bulk.
  // (Its slots by cp.async below the same length measured the same: tg128 at depth 0 366.0 / 366.6
  // against 367.1 / 367.4 tok/s, H100, fourteenth session.)
  const bool bulk = kBulk && (kGaac || n_iter >= P.bulk_min_blocks);

  // Issues block `it` of this warp from its entries `e` into stage it % kS (entries kept for the
  // decode). (issue_stage's body, written out: called here, it changed the decode kernels' SASS.)
  auto issue = [&](int32_t it, const uint32_t (&e)[kT]) {
    const int slot = it % kS;
    uint8_t* sk = wbase + (2 * slot) * kv_bytes;
    if (lane == 0)
#pragma unroll
      for (int t = 0; t < kT; ++t) ents[slot * kT + t] = e[t];
    uint64_t* bar = bulk ? bars + slot : nullptr;
    if constexpr (kGaac)
      issue_gaac<kD>(kv, gs, e, sk, sk + kv_bytes, P.half_bytes, lane, bar);
    else
      issue_bf16<kD>(kv, e, reinterpret_cast<uint16_t*>(sk), reinterpret_cast<uint16_t*>(sk + kv_bytes), lane, bar);
  };
  EntryStream<kT> es;  // the table entries of this warp's blocks (entry_stream.cuh)
  es.start(kv, s.table, kvh, b_first, b_step, n_iter);
  if (pdl_wait) {
    const int32_t b_new = s.pos0 / KV_BLOCK_TOKENS;  // the first block this step writes
    int32_t n_pre = 0;
    while (n_pre < kS - 1 && n_pre < n_iter && b_first + n_pre * b_step < b_new) ++n_pre;
    // GAAC's bases are calibration, uploaded before any step: their two dependent loads go out
    // before the wait, so that they overlap the previous kernel instead of following q's load.
    es.template issue_first<kS>(issue, n_pre, [&] {
      if constexpr (kGaac) load_gaac_bases<kD>(P, kvh, GL, b3, b4);
      pdl_begin();
    });
  } else {
    es.template issue_first<kS>(issue);
  }
  uint32_t qb[kD / 16][2];  // q is the previous kernel's output: after the wait
  const TileRow tq = query_row(P, s, kvh, r0 + (lane >> 3), n_rows);  // the row of this lane's Q^T column
  query_columns<kD>(P.q + tq.q_off, tq.valid, dk, qb);
  for (int32_t it = 0; it < n_iter; ++it) {
    es.template issue_ahead<kS>(it, issue);
    cp_async_wait<kS - 1>();  // this lane's copies of block `it` have landed
    if (bulk) mbar_wait(bars + it % kS, (uint32_t)(it / kS) & 1u);  // ... and its bulk copies
    __syncwarp();             // ... and every lane's
    if (it == 0 && pdl_wait) stamp(P.timeline, kStampFirst);
    const int32_t b = b_first + it * b_step;
    uint8_t* sk = wbase + (2 * (it % kS)) * kv_bytes;
    uint16_t *kt, *vt;
    if constexpr (kGaac) {
      // K's tiles first, then q·k on the tensor cores while the warp decodes V's tiles.
      constexpr int kRK = TileGeom<kD>::kRoundsK;
      // One decoded tile needs round 0 to hold K's tiles only: at kD = 128 (the one size kB = 3 is
      // built for) a head has one tile per half and a round is one tile (gaac_lanes_of: nsub = 1).
      static_assert(kB != 3 || (kD == 128 && kRK < TileGeom<kD>::kRounds), "one decoded tile: K's rounds first");
      kt = reinterpret_cast<uint16_t*>(dec);
      vt = reinterpret_cast<uint16_t*>(dec + (decoded_tile_count(kB) - 1) * kTileBytes);
      const uint32_t* be = ents + (it % kS) * kT;
      bool ok = decode_gaac_block<kD, 0, kRK>(kv, gs, be, sk, sk + kv_bytes, P.half_bytes, GL, b3, b4, kt, vt);
      __syncwarp();
      float sc[2][4];
      key_row_scores<kD>(kt, qb, sc);
      if constexpr (kB == 3) __syncwarp();  // every lane's ldmatrix of K is done: V may overwrite it
      if constexpr (kRK < TileGeom<kD>::kRounds)
        ok &= decode_gaac_block<kD, kRK, TileGeom<kD>::kRounds>(kv, gs, be, sk, sk + kv_bytes, P.half_bytes, GL,
                                                                b3, b4, kt, vt);
      if (!ok && lane == 0) record_corrupt(P.err, kv.layer, kvh, b);  // reported, never read
      __syncwarp();
      if (ok) {
        zero_rows_past_end<kD>(vt, len - b * KV_BLOCK_TOKENS, lane);
        key_row_rest<kD>(sc, vt, b, pos, lo, o, m, l, P.a);
      }
    } else {
      kt = reinterpret_cast<uint16_t*>(sk);
      vt = reinterpret_cast<uint16_t*>(sk + kv_bytes);
      zero_rows_past_end<kD>(vt, len - b * KV_BLOCK_TOKENS, lane);
      key_row_math<kD>(kt, vt, b, pos, lo, qb, o, m, l, P.a);
    }
    __syncwarp();  // the stage is read: the next issue may overwrite it
  }
  if (kBulk) {  // every phase issued has completed (each block was waited for): retire the barriers
    if (lane == 0)
#pragma unroll
      for (int p = 0; p < kS; ++p) mbar_inval(bars + p);
    __syncwarp();
  }
}


template <int kD>
__device__ __forceinline__ void finish_decode(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t split,
                                              int32_t n_rows, const DecodeSplit& ds, const DecodeWarp& dw, float m,
                                              float l, const float (&oc)[kD / 16][2], uint8_t* smem) {
  store_warp_state<kD>(warp_states(smem), P.kv.head_dim_v, m, l, oc);
  merge_decode<kD>(P, s, kvh, split, n_rows, ds, dw, smem);
}

// Launch bounds: kB thread blocks per SM (168 registers at three); the kShared kernels two (the
// wide row groups' three query parts and the 16 rows' accumulators take 255 at head size 128).
// A kShared launch's decode-sized sequences (beside a prefill) keep n_split, sized for kB: at
// three, their splits then run in ~1.5 waves (slower, the same bits), and so does the 16-row
// path (GAACRT_CUDA_PREFILL_WIDE=0), no longer the configuration measured before the wide one.
template <int kD, int kShared, int kB>
constexpr int kernel_min_blocks() { return kD > 128 ? 1 : (kShared ? 2 : kB); }

// PDL: the decode path waits for the previous kernel inside run_rows (after the first copies of
// old blocks), the prefill path before its first row group; nothing before either reads what the
// step writes.
// kShared: prefill-sized sequences on one stream per thread block (the launches of
// attention_prefill_*.cu): in row groups of 64 when P.prefill_wide (attention_wide.cuh), else of
// 16 (run_rows_shared); 2: row groups of 64 in steps of two blocks with two bf16 parts of the
// queries and weights (attention_prefill_pairs_*.cu, head size 128 in the three-block build; a
// kernel of its own, so that the one-block kernels keep their registers; it too holds two thread
// blocks per SM: built for three, 168 registers, its loop spilled ~150 instructions a step); 3:
// the same steps on the warpgroup mma (BF16, sm_90a only: sm90a/attention_prefill_wgmma_bf16.cu);
// 4: steps of four blocks on the warpgroup mma (the same file); without kShared (0) on run_rows.
// Decode-sized sequences take the same path either way.
template <int kD, bool kGaac, int kB, int kShared = 0>
__global__ void __launch_bounds__(kThreads, kernel_min_blocks<kD, kShared, kB>()) attention_mma_kernel(const KernelArgs P) {
  GAACRT_DYNAMIC_SMEM(smem);
  stamp(P.timeline, kStampStart);
  constexpr int kRow = TileGeom<kD>::kRow, kTileBytes = TileGeom<kD>::kTileBytes, kS = stage_count(kD, kB);
  constexpr int kR = TileGeom<kD>::kRounds;
  const KVLayerView& kv = P.kv;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const AttnSeq s = P.seqs[blockIdx.z];
  const int32_t kvh = P.head_fastest ? blockIdx.x : blockIdx.y, split = P.head_fastest ? blockIdx.y : blockIdx.x;
  const int32_t G = P.a.n_head / kv.n_head_kv, n_rows = s.n_q * G;
  const int32_t td = kv.tile_dim, d = kv.n_half * td, W = P.a.sliding_window;
  if (n_rows <= 0) return;
  // Decode-sized: this split's chunks. Splits past the last chunk with keys (a short context in a
  // session sized for a long one: n_split is fixed by the session's context) leave at once, and
  // the fused reduce counts and merges only the n_live splits before them. Skipping them keeps
  // the bits: an empty split's partial (m = -inf, l = 0, O = 0) enters the merge with weight 0.
  const DecodeSplit ds = decode_split(s, n_rows, G, W, P.n_split, P.min_split_chunks, split);
  // (A prefill launch's split index is its row group, which may exceed n_split.)
  if (n_rows <= kRowsPerGroup && split >= min(ds.n_live, P.n_split)) return;
  uint8_t* wbase = smem + warp * P.warp_bytes;

  // Columns d .. kD-1 of padded heads (d = 48 runs as kD = 64) are never written by the loaders:
  // zero them once so that 0 * garbage cannot appear. (Not in the per-warp layout where the
  // prefill path lays out its shared ring instead: zero_shared_padding; these stores would land
  // on the ring's barriers.)
  if (d < kD && !(kShared && n_rows > kRowsPerGroup)) {
    const uint32_t kv_bytes = kGaac ? kv.n_half * P.half_bytes : (uint32_t)kTileBytes;
    uint8_t* t0 = kGaac ? wbase + kS * 2 * kv_bytes : wbase;
    const int n_tiles = kGaac ? decoded_tile_count(kB) : 2 * kS;
    for (int t = 0; t < n_tiles; ++t)
      for (int x = lane; x < KV_BLOCK_TOKENS * (kD - d); x += 32)
        reinterpret_cast<uint16_t*>(t0 + t * kTileBytes)[(x / (kD - d)) * kRow + d + x % (kD - d)] = 0;
    __syncwarp();
  }

  // GAAC: this lane's decode assignment and its bases (8 b3 + 8 b4 bytes per tile it decodes;
  // the decode path loads them in run_rows, once its first copies are out).
  GaacLanes GL = {};
  GaacU32x2 b3[kR], b4[kR];
#pragma unroll
  for (int rd = 0; rd < kR; ++rd) b3[rd] = b4[rd] = GaacU32x2{0u, 0u};
  if constexpr (kGaac) GL = gaac_lanes_of(td, kv.n_half, lane);

  if (n_rows > kRowsPerGroup) {
    // ---- prefill-sized: row groups of 64 (attention_wide.cuh) or 16, one M-tile per warp ----
    if constexpr (kGaac) load_gaac_bases<kD>(P, kvh, GL, b3, b4);
    pdl_begin();
    if constexpr (kShared) {
      const uint32_t kv_bytes = kGaac ? kv.n_half * P.half_bytes : (uint32_t)kTileBytes;
      if constexpr (kShared == 3 || kShared == 4) {  // on the warpgroup mma (attention_prefill_wgmma_bf16.cu)
        static_assert(kD == 128 && kB == 3 && !kGaac, "wgmma steps: BF16, head size 128, three-block build");
        // (no padding to zero: attention.cu takes this kernel only where d = 128)
        constexpr int kSteps = kShared == 3 ? 2 : 4;
        prefill_wide<kD, kGaac, kB, kSteps, 2, kSteps>(P, s, kvh, split, n_rows, smem, GL, b3, b4);
        return;
      } else if constexpr (kShared == 2) {  // two-block steps, two parts (attention_prefill_pairs_*.cu)
        static_assert(kD == 128 && kB == 3, "two-block steps: head size 128, three-block build");
        zero_shared_padding<kD, kGaac, kB, 2>(smem, kv_bytes, d);
        prefill_wide<kD, kGaac, kB, 2, 2>(P, s, kvh, split, n_rows, smem, GL, b3, b4);
        return;
      } else {
        zero_shared_padding<kD, kGaac, kB>(smem, kv_bytes, d);
        if constexpr (kD <= KV_TILE_MAX_DIM)
          if (P.prefill_wide) {
            prefill_wide<kD, kGaac, kB, 1>(P, s, kvh, split, n_rows, smem, GL, b3, b4);
            return;
          }
      }
    }
    for (int32_t rg = split; rg * kRowsPerGroup < n_rows; rg += gridDim.x) {
      const int32_t r0 = rg * kRowsPerGroup + kRowsPerTile * warp;
      int32_t b0 = 0, b1 = 0;
      if (r0 < n_rows) row_blocks(s, G, W, r0, min(n_rows - 1, r0 + kRowsPerTile - 1), b0, b1);
      float o[kD / 16][4], oc[kD / 16][2], m, l;
      if constexpr (kShared) {
        // The row group's blocks, the same way from its first and last rows: every warp's lie inside.
        const int32_t g0 = rg * kRowsPerGroup;
        int32_t B0, B1;
        row_blocks(s, G, W, g0, min(n_rows - 1, g0 + kRowsPerGroup - 1), B0, B1);
        run_rows_shared<kD, kGaac, kB>(P, s, kvh, r0, n_rows, b0, b1, B0, B1, smem, GL, b3, b4, o, m, l);
      } else {
        run_rows<kD, kGaac, kB>(P, s, kvh, r0, n_rows, b0, b1, 1, false, wbase, GL, b3, b4, o, m, l);
      }
      key_row_sums<kD>(o, oc);
      write_key_row_output<kD>(P, s, kvh, r0, n_rows, l, oc);
    }
    return;
  }

  // ---- decode-sized: this block's share of the chunks; warps = (M-tile, key group) ----
  const DecodeWarp dw = decode_warp(n_rows, ds);
  float o[kD / 16][4], oc[kD / 16][2], m, l;
  run_rows<kD, kGaac, kB>(P, s, kvh, dw.r0, n_rows, dw.b_first, dw.b_end, dw.n_kg, true, wbase, GL, b3, b4, o, m, l);
  key_row_sums<kD>(o, oc);
  finish_decode<kD>(P, s, kvh, split, n_rows, ds, dw, m, l, oc, smem);
}

// Shared bytes the kernel needs for head size kD: the warps' buffers, or the merges' scratch if
// larger. Also returns one warp's share.
inline size_t smem_bytes(int kD, bool gaac, int32_t n_half, uint32_t half_bytes, int32_t dv, int32_t n_split,
                         uint32_t* warp_bytes, int blocks = 2) {
  const uint32_t tile = KV_BLOCK_TOKENS * (kD + 8) * 2, stages = stage_count(kD, blocks);
  const uint32_t kv_bytes = gaac ? n_half * half_bytes : tile;
  *warp_bytes = stages * 2 * kv_bytes + (gaac ? decoded_tile_count(blocks) * tile : 0) + entry_ring_bytes(kD, blocks);
  const size_t warps = (size_t)kWarps * *warp_bytes;
  const size_t merge_a = (size_t)kWarps * kRowsPerTile * (dv + 2) * sizeof(float);
  const size_t merge_b = merge_bytes(n_split);
  const size_t s = warps > merge_a ? warps : merge_a;
  return s > merge_b ? s : merge_b;
}

// Launches an attention kernel (raising its dynamic shared-memory limit the first time a device
// needs more than the default 48 KB for it). The kernel is a template argument so that each one
// keeps its own record of what was allowed (the attribute is per kernel).
template <void (*kKernel)(const KernelArgs)>
inline void launch_attention_kernel(const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device) {
  static size_t allowed[64] = {};
  if (smem > 48 * 1024 && (device < 0 || device >= 64 || allowed[device] < smem)) {
    GAACRT_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    if (device >= 0 && device < 64) allowed[device] = smem;
  }
  launch_kernel(kKernel, grid, kThreads, smem, stream, P);
}

// Launches the kernel of one head size (blocks: the thread blocks per SM it is built for, 3 only
// at head size 128).
template <int kD, bool kGaac, int kShared, int kB = 2>
inline void launch_one(const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device) {
  launch_attention_kernel<attention_mma_kernel<kD, kGaac, kB, kShared>>(P, grid, smem, stream, device);
}

template <bool kGaac, int kShared = 0>
inline void launch_dims(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device,
                        int blocks) {
  switch (kD) {
    case 16: launch_one<16, kGaac, kShared>(P, grid, smem, stream, device); break;
    case 32: launch_one<32, kGaac, kShared>(P, grid, smem, stream, device); break;
    case 64: launch_one<64, kGaac, kShared>(P, grid, smem, stream, device); break;
    case 128:
      if (blocks == 3) launch_one<128, kGaac, kShared, 3>(P, grid, smem, stream, device);
      else launch_one<128, kGaac, kShared>(P, grid, smem, stream, device);
      break;
    default: launch_one<256, kGaac, kShared>(P, grid, smem, stream, device); break;
  }
}

// Defined in attention_bf16.cu / attention_gaac.cu / attention_e8.cu (separate files: nvcc builds
// them in parallel). The E8 kernel (kernels/attention_e8_mma.cuh) takes E8 sequences of head
// size 32, 64 or 128 (prefill-sized ones in its `prefill` instantiation).
void launch_attention_bf16(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device,
                           int blocks);
void launch_attention_gaac(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device,
                           int blocks);
// prefill: the kernel that also takes the launch's prefill-sized sequences (lossy::e8_prefill_on_mma).
void launch_attention_e8(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device,
                         bool prefill);
// The kShared kernels, for launches with a prefill-sized sequence (attention_prefill_bf16.cu /
// attention_prefill_gaac.cu).
void launch_attention_prefill_bf16(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream,
                                   int device, int blocks);
void launch_attention_prefill_gaac(int kD, const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream,
                                   int device, int blocks);
// The kShared = 2 kernel (head size 128, the three-block build: attention.cu asks for no other), in
// attention_prefill_pairs_bf16.cu / attention_prefill_pairs_gaac.cu.
void launch_attention_prefill_pairs_bf16(const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device);
void launch_attention_prefill_pairs_gaac(const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device);
// The kShared = 3 kernel (the kShared = 2 kernel's steps on the warpgroup mma, sm_90a; BF16 pages,
// head size 128), in sm90a/attention_prefill_wgmma_bf16.cu when the build has sm_90a code
// (GAACRT_CUDA_SM90A; false otherwise, launching nothing).
// steps: 2 (kShared = 3, the two-block steps with the step before held) or 4 (kShared = 4).
bool launch_attention_prefill_wgmma_bf16(const KernelArgs& P, dim3 grid, size_t smem, cudaStream_t stream, int device,
                                         int steps);

}  // namespace gaacrt::cuda::attn
