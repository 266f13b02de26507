// attention_prefill.cuh — prefill-sized sequences of the tensor-core attention kernel
// (attention_mma.cuh): a thread block's warps on one stream of K/V blocks, each block copied (and
// GAAC's decoded) once into a ring the thread block shares.
#pragma once
#include "attention_block.cuh"
#include "entry_stream.cuh"

namespace gaacrt::cuda::attn {

// Starts the copies of a block (table entries e) into stage `slot` of the stages at `stages`
// (K then V, kv_bytes each), keeping its entries in ents[slot] for the decode; bulk: by bulk copies
// completing on the stage's barrier in bars, else cp.async. The calling warp's lanes issue them —
// or, spread (BF16), this warp's quarter: by bulk copies a quarter of the rows (the barrier takes
// four arrivals), by cp.async (the usual tile) a quarter of the chunks, zero-filling rows at or
// past n_valid (issue_bf16_spread). kWgTile (BF16, head size 128, steps of kWgTile blocks in a
// ring of a multiple of kWgTile stages): into the wgmma step tile over the step's stages instead
// (issue_bf16_step_tile; the step's first stage slot - slot % kWgTile, the block's place in its
// step slot % kWgTile).
template <int kD, bool kGaac, int kWgTile = 0>
__device__ __forceinline__ void issue_stage(const KVLayerView& kv, const GaacStaging& gs, uint32_t half_bytes,
                                            const uint32_t (&e)[TileGeom<kD>::kTiles], int slot, uint8_t* stages,
                                            uint32_t kv_bytes, uint32_t* ents, uint64_t* bars, bool bulk, int lane,
                                            bool spread = false, int32_t n_valid = KV_BLOCK_TOKENS) {
  constexpr int kT = TileGeom<kD>::kTiles;
  uint8_t* sk = stages + (2 * slot) * kv_bytes;
  if (kGaac && threadIdx.x == 0)  // (the decode's; BF16 reads none)
#pragma unroll
    for (int t = 0; t < kT; ++t) ents[slot * kT + t] = e[t];
  uint64_t* bar = bulk ? bars + slot : nullptr;
  if constexpr (kGaac) {
    issue_gaac<kD>(kv, gs, e, sk, sk + kv_bytes, half_bytes, lane, bar);
  } else {
    uint16_t* kt = reinterpret_cast<uint16_t*>(sk);
    uint16_t* vt = reinterpret_cast<uint16_t*>(sk + kv_bytes);
    if constexpr (kWgTile)
      issue_bf16_step_tile<kD, kThreads, kWgTile>(kv, e, stages + 2 * (slot - slot % kWgTile) * kv_bytes,
                                                  slot % kWgTile, threadIdx.x, n_valid);
    else if (spread && !bulk) issue_bf16_spread<kD, kThreads>(kv, e, kt, vt, threadIdx.x, n_valid);
    else if (spread) issue_bf16<kD>(kv, e, kt, vt, lane, bar, threadIdx.x >> 5, kWarps);
    else issue_bf16<kD>(kv, e, kt, vt, lane, bar);
  }
}


// ---- prefill: a thread block's four warps on one stream of blocks -----------------------------
// A row group's 16 rows are four M-tiles of consecutive rows (GQA group of 4: four consecutive
// query tokens), whose visible blocks are one range give or take the first (sliding window) and
// the last block. The per-warp path (run_rows) copies every block once per warp, and GAAC decodes
// it once per warp; here each block of the group's range [B0, B1) is copied once into a ring of
// shared_stage_count stages the thread block shares (BF16: every warp a quarter of the copies;
// GAAC's slots: warp 0), GAAC's tiles are decoded once (a warp per round: decode_my_round), and
// every warp runs key_row_math on the blocks of its own
// range [b0, b1), in order: the same blocks, the same sums, the same bits as run_rows.
// Barriers per step (kStep blocks: 1, or 2 for the wide row groups' steps of 32 keys): A (staged),
// for GAAC B (decoded; a block-wide AND of the slots' validation). A also frees the stages (and
// GAAC's decoded tiles) of the step before: a warp reaches A only after its math on that step, so
// the refills issued after A and the next decode after A never overwrite what a warp still reads
// (a third barrier there was redundant; the emulation's mutation of it, the eighth session,
// changed no test).
// Stages: a step's blocks in use and two steps' in flight for kStep = 2 (six); for one-block
// steps twice a decode warp's stage_count (four at head size 128 in the three-block build). The
// two-block wgmma steps (hold: their p·v runs behind the next step's q·k, attention_wide.cuh)
// keep the step before too (eight).
__host__ __device__ constexpr int shared_stage_count(int kD, int blocks, int step = 1, bool hold = false) {
  return step == 1 ? 2 * stage_count(kD, blocks) : (hold ? 4 : 3) * step;
}
// Shared bytes of the ring: stages, GAAC's decoded K and V tiles (a pair per block of a step), the
// stages' barriers and entries.
__host__ __device__ constexpr uint32_t shared_ring_bytes(int kD, bool gaac, int blocks, uint32_t kv_bytes,
                                                         int step = 1, bool hold = false) {
  const uint32_t stages = shared_stage_count(kD, blocks, step, hold), tile = KV_BLOCK_TOKENS * (kD + 8) * 2;
  return stages * 2 * kv_bytes + (gaac ? 2 * step * tile : 0) + stages * 8 +
         stages * (kD > KV_TILE_MAX_DIM ? 4 : 2) * 4;
}

// Zeroes columns d .. kD-1 of the ring's BF16 tiles (the stages, or GAAC's decoded tiles) once:
// the loaders never write them (padded heads, d = 48 runs as kD = 64).
template <int kD, bool kGaac, int kB, int kStep = 1>
__device__ __forceinline__ void zero_shared_padding(uint8_t* base, uint32_t kv_bytes, int32_t d) {
  constexpr int kRow = TileGeom<kD>::kRow, kTileBytes = TileGeom<kD>::kTileBytes;
  constexpr int kSS = shared_stage_count(kD, kB, kStep);
  if (d >= kD) return;
  uint8_t* t0 = kGaac ? base + kSS * 2 * kv_bytes : base;
  const int n_tiles = kGaac ? 2 * kStep : 2 * kSS;  // BF16: a stage's K and V are tiles (kv_bytes = kTileBytes)
  for (int t = 0; t < n_tiles; ++t)
    for (int x = threadIdx.x; x < KV_BLOCK_TOKENS * (kD - d); x += kThreads)
      reinterpret_cast<uint16_t*>(t0 + t * kTileBytes)[(x / (kD - d)) * kRow + d + x % (kD - d)] = 0;
}

// Who decodes a GAAC block in the shared stream: round r (K's tiles, then V's) goes to warp
// (r + 1) % 4, so warp 0, the one that issues GAAC's copies, decodes only at head size 256 (four
// rounds). The second block of a two-block step passes warp - kRounds (mod 4): its rounds go to
// the warps after the first block's, so at head size 128 every warp decodes one tile a step.
// (Half rounds on every warp — a tile's lanes' groups 0-3 on one warp, 4-7 on another, each
// recounting the tile's escape offsets — were 15% slower after 32K on an H100: pp512 1,990
// against 2,349 tok/s, the twelfth session in bench/results/cuda_h200.md. A call for the warp's
// one block, picked by pointer, instead of a call per block of the step spilled more in a
// two-block GAAC kernel, the three-part one since removed: 41 local loads and stores in its loop
// against 28.)
template <int kD, int kR = 0>
__device__ __forceinline__ bool decode_my_round(int warp, const KVLayerView& kv, const GaacStaging& gs,
                                                const uint32_t* be, const uint8_t* sk, const uint8_t* sv,
                                                uint32_t half_bytes, const GaacLanes& GL,
                                                const GaacU32x2 (&b3)[TileGeom<kD>::kRounds],
                                                const GaacU32x2 (&b4)[TileGeom<kD>::kRounds], uint16_t* kt,
                                                uint16_t* vt) {
  static_assert(TileGeom<kD>::kRounds <= kWarps, "a warp per decode round");
  if constexpr (kR < TileGeom<kD>::kRounds) {
    if (warp == (kR + 1) % kWarps)
      return decode_gaac_block<kD, kR, kR + 1>(kv, gs, be, sk, sv, half_bytes, GL, b3, b4, kt, vt);
    return decode_my_round<kD, kR + 1>(warp, kv, gs, be, sk, sv, half_bytes, GL, b3, b4, kt, vt);
  } else {
    return true;
  }
}

// First block of the keys rows R0 .. R1 (R1 included) can see, and one past the last.
__device__ __forceinline__ void row_blocks(const AttnSeq& s, int32_t G, int32_t W, int32_t R0, int32_t R1, int32_t& b0,
                                           int32_t& b1) {
  const int32_t p0 = s.pos0 + R0 / G, p1 = s.pos0 + R1 / G;
  b0 = (W > 0 ? max(0, p0 - W + 1) : 0) / KV_BLOCK_TOKENS;
  b1 = p1 / KV_BLOCK_TOKENS + 1;
}

// One row group's stream: blocks B0 .. B1-1 of sequence s and kv-head kvh, each staged once into
// the ring and, for GAAC, decoded once (decode_my_round), in steps of kStep blocks; every warp
// then calls math(kt, vt, b, n) on a step's n blocks b .. b + n - 1 (n = kStep but for a shorter
// last step; kt[i], vt[i]: block b + i's BF16 rows). start() runs once the first copies are
// out (the rows' query fragments: their loads overlap the copies). bf16_bulk: BF16 pages by bulk
// copies where run_rows would take them (a long stream), else always by cp.async (the wide row
// groups: 6% faster after 32K on an H100, the twelfth session). Every warp issues a quarter of each
// block's BF16 copies — by bulk copies a quarter of the rows (a bulk copy with a per-lane address
// issues one lane at a time: warp 0 alone spent ~290 instructions a block, which the other warps
// waited for at A; now 8 lanes a warp), the stage's barrier taking the four warps' arrivals and
// warp 0 waiting on it; by cp.async (the usual tile) a quarter of each page's chunks, each thread
// waiting for its own before A, the newest block's rows past the last token zero-filled by the
// copies (against warp 0 alone: pp512 after 32K 2,718 against 2,257 tok/s on the H100). Padded
// heads' BF16 pages and GAAC's slots (a slot is one contiguous copy): warp 0. kWgTile (= kStep):
// a step's blocks go to the wgmma step tile (issue_stage) and kt[0] is its start
// (attention_wide.cuh); the stream's last step is padded to kStep blocks, zero-filled (released
// entries past the stream), so that the wgmma sizes stay constants. Two-block steps (kWgTile = 2)
// hold the step before (its p·v runs behind the next step's q·k).
template <int kD, bool kGaac, int kB, int kStep, int kWgTile = 0, class Start, class Math>
__device__ __forceinline__ void shared_stream(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t B0,
                                              int32_t B1, uint8_t* base, const GaacLanes& GL,
                                              const GaacU32x2 (&b3)[TileGeom<kD>::kRounds],
                                              const GaacU32x2 (&b4)[TileGeom<kD>::kRounds], Start&& start,
                                              Math&& math, bool bf16_bulk = true) {
  constexpr bool kHold = kWgTile == 2;
  constexpr int kTileBytes = TileGeom<kD>::kTileBytes, kSS = shared_stage_count(kD, kB, kStep, kHold);
  constexpr int kT = TileGeom<kD>::kTiles, kR = TileGeom<kD>::kRounds;
  // Blocks issued before the first step; block it + kAhead is issued at block it's turn, into the
  // stages of the step before (kHold: of the step before that; the step before is still read).
  constexpr int kAhead = kSS - (kHold ? 2 : 1) * kStep;
  static_assert(kR <= kWarps, "a warp per decode round");
  static_assert(!kGaac || kStep == 1 || kStep * kR <= kWarps, "a step's decode rounds on different warps");
  const KVLayerView& kv = P.kv;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t len = s.pos0 + s.n_q;

  const uint32_t kv_bytes = kGaac ? kv.n_half * P.half_bytes : (uint32_t)kTileBytes;
  uint8_t* dec = base + kSS * 2 * kv_bytes;  // GAAC: the step's decoded K and V tiles
  uint64_t* bars = reinterpret_cast<uint64_t*>(dec + (kGaac ? 2 * kStep * kTileBytes : 0));
  uint32_t* ents = reinterpret_cast<uint32_t*>(bars + kSS);  // [kSS][kT]
  constexpr bool kBulk = GAACRT_BULK_COPY;
  const int32_t n_iter = B1 - B0;
  static_assert(!kWgTile || (!kGaac && kStep == kWgTile && kSS % kStep == 0 &&
                             2 * kStep * kTileBytes >= 2 * wg_tile_bytes(kStep)),
                "the wgmma step tile: BF16 pages, a step's stages hold it");
  const bool bulk = kBulk && !kWgTile && (kGaac || (bf16_bulk && n_iter >= P.bulk_min_blocks));
  // BF16 pages: every warp issues a quarter of each block (block-uniform): by bulk copies where
  // the rows allow them, else by cp.async in the usual tile.
  const bool spread = !kGaac && (bulk ? kv.tile_dim % 8 == 0 : kv.tile_dim == TileGeom<kD>::kTd);
  if (kBulk && threadIdx.x == 0) {
#pragma unroll
    for (int p = 0; p < kSS; ++p) mbar_init(bars + p, spread && bulk ? kWarps : 1);
    fence_mbar_init();
  }
  __syncthreads();  // the barriers, and the previous row group's last reads of the ring

  const bool issuer = warp == 0 || spread;  // warp-uniform
  const GaacStaging& gs = P.gaac_stage;
  auto issue = [&](int32_t it, const uint32_t (&e)[kT]) {  // issuers only
    issue_stage<kD, kGaac, kWgTile>(kv, gs, P.half_bytes, e, it % kSS, base, kv_bytes, ents, bars, bulk, lane,
                                    spread, len - (B0 + it) * KV_BLOCK_TOKENS);
  };
  EntryStream<kT> es;  // the issuers' (each warp loads the same entries when spread)
  if (issuer) {
    es.start(kv, s.table, kvh, B0, 1, n_iter, kWgTile ? (n_iter + kStep - 1) / kStep * kStep : 0);
    es.template issue_first<kAhead + 1>(issue);
  }
  start();
  for (int32_t it = 0; it < n_iter; it += kStep) {
    const int32_t b = B0 + it;
    const int n = min(kStep, n_iter - it);  // this step's blocks
    // Block b + i's stage, and the BF16 rows math reads: the stage, or GAAC's decoded tiles.
    auto stage = [&](int i) { return base + 2 * ((it + i) % kSS) * kv_bytes; };
    auto rows = [&](int i, int is_v) {
      return reinterpret_cast<uint16_t*>(kGaac ? dec + (2 * i + is_v) * kTileBytes : stage(i) + is_v * kv_bytes);
    };
    const uint16_t* kts[kStep];
    const uint16_t* vts[kStep];
#pragma unroll
    for (int i = 0; i < kStep; ++i) {
      kts[i] = rows(i, 0);
      vts[i] = rows(i, 1);
    }
    // Rows past the newest token: only the stream's last block can hold them, the step's last.
    const int32_t n_last = len - (b + n - 1) * KV_BLOCK_TOKENS;
    const bool last = n_last < KV_BLOCK_TOKENS;  // block-uniform
    if (issuer) {
      // kAhead groups were committed before the loop and kStep per earlier step: all but the
      // newest kAhead - kStep hold this step's blocks and the ones before them (a group past the
      // stream's end is empty).
      cp_async_wait<kAhead - kStep>();  // this lane's copies of the step's blocks have landed
#pragma unroll
      for (int i = 0; i < kStep; ++i)  // ... and all bulk copies
        if (bulk && warp == 0 && i < n) mbar_wait(bars + (it + i) % kSS, (uint32_t)((it + i) / kSS) & 1u);
      __syncwarp();
      if (!kGaac && last && warp == 0 && !(spread && !bulk))  // (by cp.async, spread: zero-filled by the copies)
        zero_rows_past_end<kD>(rows(n - 1, 1), n_last, lane);
      // Generic writes to the stage (zeroed rows, cp.async) before any warp's later bulk copies
      // into it (the issuer fences too, after A; this is the writer's side, for a stage another
      // warp refills).
      if (!kGaac && spread && (last || !bulk)) fence_proxy_async();
    }
    __syncthreads();  // A: the step's blocks are staged for every warp
    // Blocks it + kAhead .. into the stages the step before used (freed by A: every warp is done
    // with them; kHold: the step before that, whose p·v every warp waited for in the step
    // before), then every issuer starts on this step.
    // (kHold: before the step's wgmma, not behind them: issued while a wgmma was in flight, the
    // copies' address registers waited for the registers the wgmma still read — pp512 after 32K
    // 4,150 against 4,290 tok/s on an H100, the eighteenth session.)
    if (issuer) {
      if constexpr (kWgTile) {
        es.template issue_ahead_group<kAhead + 1, kStep>(it, issue);
      } else {
#pragma unroll
        for (int i = 0; i < kStep; ++i) es.template issue_ahead<kAhead + 1>(it + i, issue);
      }
    }
    if constexpr (kGaac) {
      bool ok_w = true;
#pragma unroll
      for (int i = 0; i < kStep; ++i) {
        if (i >= n) break;  // block-uniform
        const uint8_t* sk = stage(i);
        const bool ok_i = decode_my_round<kD>((warp + kWarps - kR * i) % kWarps, kv, gs, ents + (it + i) % kSS * kT,
                                              sk, sk + kv_bytes, P.half_bytes, GL, b3, b4, rows(i, 0), rows(i, 1));
        if (!ok_i && lane == 0) record_corrupt(P.err, kv.layer, kvh, b + i);  // reported, never read
        ok_w &= ok_i;
      }
      // B: decoded (and validated) for every warp; a corrupt tile's step is skipped.
      if (!__syncthreads_and(ok_w)) continue;
      if (last) {  // block-uniform: the stream's newest block is the step's last
        if (warp == 0) zero_rows_past_end<kD>(rows(n - 1, 1), n_last, lane);
        __syncthreads();
      }
    }
    math(kts, vts, b, n);
  }
  if (kBulk && threadIdx.x == 0)  // every phase issued has completed: retire the barriers
#pragma unroll
    for (int p = 0; p < kSS; ++p) mbar_inval(bars + p);
}

// Narrow row groups: this warp's M-tile of 4 rows (r0 ..) over its blocks [b0, b1) of the group's
// stream [B0, B1): the same blocks and sums as run_rows, so the same bits.
template <int kD, bool kGaac, int kB>
__device__ __forceinline__ void run_rows_shared(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t r0,
                                                int32_t n_rows, int32_t b0, int32_t b1, int32_t B0, int32_t B1,
                                                uint8_t* base, const GaacLanes& GL,
                                                const GaacU32x2 (&b3)[TileGeom<kD>::kRounds],
                                                const GaacU32x2 (&b4)[TileGeom<kD>::kRounds], float (&o)[kD / 16][4],
                                                float& m, float& l) {
  const int lane = threadIdx.x & 31;
  const TileRow tr = query_row(P, s, kvh, r0 + (lane & 3), n_rows);  // as run_rows: the softmax row
  const TileRow tq = query_row(P, s, kvh, r0 + (lane >> 3), n_rows);  // ... and the Q^T column's
  uint32_t qb[kD / 16][2];
  shared_stream<kD, kGaac, kB, 1>(
      P, s, kvh, B0, B1, base, GL, b3, b4,
      [&] {
        reset_row_state(o, m, l);
        query_columns<kD>(P.q + tq.q_off, tq.valid, P.kv.head_dim_k, qb);
      },
      [&](const uint16_t* const (&kt)[1], const uint16_t* const (&vt)[1], int32_t b, int) {
        if (b >= b0 && b < b1) key_row_math<kD>(kt[0], vt[0], b, tr.pos, tr.lo, qb, o, m, l, P.a);
      });
}

}  // namespace gaacrt::cuda::attn
