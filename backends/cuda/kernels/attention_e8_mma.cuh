// attention_e8_mma.cuh — the tensor-core attention kernel of E8 k2v2 caches: decode steps split
// along the context (run_rows_e8 per M-tile of 4 rows, merged by merge_decode) and, in the
// kPrefill instantiation, prefill-sized sequences in row groups (attention_e8_wide.cuh; the
// 16-row groups of run_rows_e8 with GAACRT_CUDA_PREFILL_WIDE=0). The per-block math and the
// method are attention_e8_block.cuh's.
#pragma once
#include "attention_e8_wide.cuh"

namespace gaacrt::cuda::attn {

// One warp, one M-tile (rows r0 .. r0+3), blocks b_first, b_first + b_step, ... below b_end of
// an E8 cache in the key-row layout (attention_e8_block.cuh), with q_rows the (sequence,
// kv-head)'s rotated queries [rows][kD] (global memory): leaves this lane's row state (row r0 +
// lane % 4; O^T's parts and the brackets not yet summed: e8_key_row_sums) in o, oz, m, l. kPairs:
// e8_query_columns'.
template <int kD, bool kPairs = true>
__device__ __forceinline__ void run_rows_e8(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t r0,
                                            int32_t n_rows, int32_t b_first, int32_t b_end, int32_t b_step,
                                            uint8_t* wbase, const uint32_t* tab, const float* q_rows, bool has_slots,
                                            float (&o)[kD / 16][4], float (&oz)[4], float& m, float& l) {
  constexpr int kKs = kD / 32;
  const KVLayerView& kv = P.kv;
  const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
  const int lane = threadIdx.x & 31, tig = lane & 3;
  const TileRow tr = query_row(P, s, kvh, r0 + tig, n_rows);          // this lane's softmax row
  const TileRow tq = query_row(P, s, kvh, r0 + (lane >> 3), n_rows);  // the row of its Q^T column
  const int32_t len = s.pos0 + s.n_q;                                 // tokens in the cache

  E8Columns<kD> C = {};
  if (has_slots)
    e8_query_columns<kD, kPairs>(q_rows + (tq.valid ? tq.R : 0) * kD, tq.valid,
                         st.mean_rot ? st.mean_rot + (int64_t)kvh * kD : nullptr, 1.f / st.alpha, C);
  uint32_t qb[kD / 16][2];  // the unrotated query's columns, made at the first raw page (most
  bool have_qb = false;     // splits of a long context have none: the window is the newest blocks)
  reset_row_state(o, m, l);
#pragma unroll
  for (int c = 0; c < 4; ++c) oz[c] = 0.f;
  const E8ValueLane VL = e8_value_lane<true>();
  const int qd = (tig * kKs) / 4, bq = (tig * kKs) % 4;
  uint16_t* raw = e8_raw_tile<kD>(wbase);
  float p[2];
  uint32_t pb[2];
  auto keys = [&](int32_t, const uint8_t* stg, uint32_t ek, float (&sc)[2]) {
    if (kv_entry_is_slot(ek)) {
      e8_key_row_scores<kD>(stg, tab, C, qd, bq, sc);
    } else {  // a raw page (or a released one: zeros, never visible) against the unrotated q
      copy_page_sync<kD>(e8_page(kv, ek), kD, 0, raw, lane, 32);
      if (!have_qb) {  // (warp-uniform)
        query_columns<kD>(P.q + tq.q_off, tq.valid, kD, qb);
        have_qb = true;
      }
      __syncwarp();
      float s2[2][4];
      key_row_scores<kD>(raw, qb, s2);
      key_row_score_sums(s2, sc);
      __syncwarp();  // the tile is read: V may take it
    }
  };
  auto soft = [&](int32_t b, float (&sc)[2]) {
    const float corr = key_row_softmax(sc, b, tr.pos, tr.lo, m, l, P.a, p);
    if (__any_sync(kFull, corr != 1.f)) {
      scale_accumulators(o, corr);
#pragma unroll
      for (int c = 0; c < 4; ++c) oz[c] *= corr;
    }
    key_row_weight_columns(p, pb);
  };
  auto values = [&](int32_t b, const uint8_t* stg, uint32_t ev) {
    if (kv_entry_is_slot(ev)) {
      e8_key_row_values<kD>(stg + E8Geom<kD>::kSlotK, p, pb, VL, o, oz);
    } else {
      copy_page_sync<kD>(e8_page(kv, ev), kD, 0, raw, lane, 32);
      __syncwarp();
      zero_rows_past_end<kD>(raw, len - b * KV_BLOCK_TOKENS, lane);
      key_row_values<kD>(raw, pb, o);
    }
  };
  // Block b's values and block bn's keys: side by side when both are slots (the slot tests fold,
  // one basic block; no raw tile between them), else one after the other.
  auto pair = [&](int32_t b, const uint8_t* stg, uint32_t ev, int32_t bn, const uint8_t* stg_n, uint32_t ek_n,
                  float (&sc)[2]) {
    if (kv_entry_is_slot(ev) && kv_entry_is_slot(ek_n)) {
      keys(bn, stg_n, ek_n, sc);
      values(b, stg, ev);
    } else {
      values(b, stg, ev);
      __syncwarp();  // the raw tile is read
      keys(bn, stg_n, ek_n, sc);
    }
  };
  e8_stream_overlapped<kD>(kv, s, kvh, b_first, b_end, b_step, wbase, keys, soft, values, pair);
}

// Grid (kv-heads, n_split or more, sequences), kv-head fastest (attention.cu). Sequences of more
// than 16 rows: in the kPrefill kernel (launches with lossy::e8_prefill_on_mma), thread block y
// takes row groups y, y + gridDim.y, ... of 64 rows (P.prefill_wide: 16 rows a warp,
// prefill_e8_wide) or 16 (one M-tile a warp, run_rows_e8), each warp over its rows' whole
// visible range, and writes its rows; else attention_lossy.cu's kernel has them. Built for two
// thread blocks per SM (255 registers at head 128), three without kPrefill: decode-only launches
// run the kernel without, its SASS as before.
template <int kD, bool kPrefill = false>
__global__ void __launch_bounds__(kThreads, kPrefill ? 2 : 3) attention_e8_mma_kernel(const KernelArgs P) {
  GAACRT_DYNAMIC_SMEM(smem);
  using Geo = E8Geom<kD>;
  const KVLayerView& kv = P.kv;
  stamp(P.timeline, kStampStart);
  // The table, the sequence and its block entries first, while the previous kernel may still
  // run (all written before the step); pdl_begin() before the first read of q.
  uint32_t* tab = reinterpret_cast<uint32_t*>(smem);
  for (int x = threadIdx.x; x < E8_N_PROTO; x += kThreads) tab[x] = g_e8_table[x];
  const int warp = threadIdx.x >> 5;
  const AttnSeq s = P.seqs[blockIdx.z];
  const int32_t kvh = blockIdx.x, split = blockIdx.y;  // kv-head fastest (attention.cu)
  const int32_t G = P.a.n_head / kv.n_head_kv, n_rows = s.n_q * G;
  // (Longer sequences of a launch without kPrefill are the CUDA-core kernel's.)
  if (n_rows <= 0 || (n_rows > kRowsPerGroup && (!kPrefill || n_rows > P.rot_rows))) return;
  const int32_t rot_rows = kPrefill ? P.rot_rows : kRowsPerGroup;
  const float* q_rows = P.q_rot + ((int64_t)blockIdx.z * kv.n_head_kv + kvh) * rot_rows * kD;
  const uint32_t* kent = s.table + kv_entry_index(kv, kvh, 0, 0, 0);
  if (kPrefill && n_rows > kRowsPerGroup) {
    pdl_begin();
    // ---- prefill-sized: row groups of 64 (attention_e8_wide.cuh) or 16 (run_rows_e8), each warp
    // over its rows' whole visible range ----
    const int32_t W = P.a.sliding_window;
    uint8_t* wbase = smem + Geo::kWarpsOff + warp * Geo::kWarpBytes;
    const bool wide = P.prefill_wide != 0;
    const int32_t rows = wide ? kWideRows : kRowsPerGroup, warp_rows = wide ? kWideRowsPerWarp : kRowsPerTile;
    for (int32_t rg = split; rg * rows < n_rows; rg += gridDim.y) {  // block-uniform
      // This warp's blocks, and the row group's (for the test whether any is a slot).
      const int32_t g0 = rg * rows, r0 = g0 + warp_rows * warp;
      int32_t b0 = 0, b1 = 0, B0, B1;
      if (r0 < n_rows) row_blocks(s, G, W, r0, min(n_rows, r0 + warp_rows) - 1, b0, b1);
      row_blocks(s, G, W, g0, min(n_rows, g0 + rows) - 1, B0, B1);
      bool slot = false;
      for (int32_t b = B0 + (int32_t)threadIdx.x; b < B1; b += kThreads) slot |= kv_entry_is_slot(__ldg(kent + b));
      const bool has_slots = __syncthreads_or(slot);
      if (wide) {
        prefill_e8_wide<kD>(P, s, kvh, r0, n_rows, b0, b1, wbase, tab, q_rows, has_slots);
      } else {
        float o[kD / 16][4], oz[4], oc[kD / 16][2], m, l;
        run_rows_e8<kD, false>(P, s, kvh, r0, n_rows, b0, b1, 1, wbase, tab, q_rows, has_slots, o, oz, m, l);
        e8_key_row_sums<kD>(o, oz, oc);
        write_key_row_output<kD>(P, s, kvh, r0, n_rows, l, oc);
      }
    }
    return;
  }
  const DecodeSplit ds = decode_split(s, n_rows, G, P.a.sliding_window, P.n_split, P.min_split_chunks, split);
  if (split >= min(ds.n_live, P.n_split)) return;  // block-uniform, before the first barrier
  // The rotated queries only when some block of this split is a slot (a short context is all
  // raw pages).
  bool slot = false;
  for (int32_t b = ds.B0 + (int32_t)threadIdx.x; b < ds.B1; b += kThreads) slot |= kv_entry_is_slot(__ldg(kent + b));
  const bool has_slots = __syncthreads_or(slot);
  pdl_begin();
  stamp(P.timeline, kStampFirst);

  const DecodeWarp dw = decode_warp(n_rows, ds);
  float o[kD / 16][4], oz[4], oc[kD / 16][2], m, l;
  run_rows_e8<kD>(P, s, kvh, dw.r0, n_rows, dw.b_first, dw.b_end, dw.n_kg,
                  smem + Geo::kWarpsOff + warp * Geo::kWarpBytes, tab, q_rows, has_slots, o, oz, m, l);
  e8_key_row_sums<kD>(o, oz, oc);
  finish_decode<kD>(P, s, kvh, split, n_rows, ds, dw, m, l, oc, smem);
}

// Shared bytes of the E8 kernel for head size kD (its buffers, or the merges' scratch if larger).
inline size_t e8_smem_bytes(int kD, int32_t n_split) {
  const size_t own = kD == 128 ? E8Geom<128>::kBytes : (kD == 64 ? E8Geom<64>::kBytes : E8Geom<32>::kBytes);
  const size_t merge_a = (size_t)kWarps * kRowsPerTile * (kD + 2) * sizeof(float);
  return std::max(own, std::max(merge_a, merge_bytes(n_split)));
}

}  // namespace gaacrt::cuda::attn
