// attention_e8_mma.cuh — the tensor-core attention kernel of E8 k2v2 caches: decode steps split
// along the context (run_rows_e8 per M-tile of 4 rows, merged by merge_decode) and, in the
// kPrefill instantiation, prefill-sized sequences in row groups (attention_e8_wide.cuh; the
// 16-row groups of run_rows_e8 with GAACRT_CUDA_PREFILL_WIDE=0). The per-block math and the
// method are attention_e8_block.cuh's.
#pragma once
#include "attention_e8_wide.cuh"

namespace gaacrt::cuda::attn {

// One warp, one M-tile (rows r0 .. r0+3), blocks b_first, b_first + b_step, ... below b_end of
// an E8 cache, with q_rows the (sequence, kv-head)'s rotated queries [16][kD] (global memory):
// leaves this lane's state (parts and brackets not yet summed) in o, oz, m, l.
template <int kD>
__device__ __forceinline__ void run_rows_e8(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t r0,
                                            int32_t n_rows, int32_t b_first, int32_t b_end, int32_t b_step,
                                            uint8_t* wbase, const uint32_t* tab, const float* q_rows, bool has_slots,
                                            float (&o)[kD / 16][4], float (&oz)[4], float& m, float& l) {
  using Geo = E8Geom<kD>;
  constexpr int kKs = Geo::kKs;
  const KVLayerView& kv = P.kv;
  const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
  const int lane = threadIdx.x & 31, tig = lane & 3;
  const TileRow tr = tile_row(P, s, kvh, r0, n_rows);
  const int32_t len = s.pos0 + s.n_q;  // tokens in the cache

  E8Query<kD> Q = {};
  if (has_slots)
    e8_query<kD>(q_rows + (tr.valid ? tr.R : 0) * kD, tr.valid, st.mean_rot ? st.mean_rot + (int64_t)kvh * kD : nullptr,
                 1.f / st.alpha, Q);
#pragma unroll
  for (int i = 0; i < kD / 16; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) o[i][c] = 0.f;
#pragma unroll
  for (int c = 0; c < 4; ++c) oz[c] = 0.f;
  m = -INFINITY;
  l = 0.f;
  const E8ValueLane VL = e8_value_lane();
  const int qd = (tig * kKs) / 4, bq = (tig * kKs) % 4;
  uint16_t* raw = e8_raw_tile<kD>(wbase);
  // Accumulator columns 2t, 2t + 1 belong to rows (2t) % 4, (2t + 1) % 4, whose factors the lanes
  // 4 r hold. Skipping x * 1 is exact; maxima rarely move after the first blocks.
  auto rescale = [&](float corr) {
    if (__any_sync(kFull, corr != 1.f)) {
      const float c0 = __shfl_sync(kFull, corr, 4 * ((2 * tig) & 3));
      const float c1 = __shfl_sync(kFull, corr, 4 * ((2 * tig + 1) & 3));
#pragma unroll
      for (int i = 0; i < kD / 16; ++i) {
        o[i][0] *= c0;
        o[i][1] *= c1;
        o[i][2] *= c0;
        o[i][3] *= c1;
      }
      oz[0] *= c0;
      oz[1] *= c1;
      oz[2] *= c0;
      oz[3] *= c1;
    }
  };
  auto block = [&](int32_t b, const uint8_t* stg, uint32_t ek, uint32_t ev) {
    float sc[4], p[4];
    if (kv_entry_is_slot(ek)) {
      e8_block_scores<kD>(stg, tab, Q, qd, bq, sc);
    } else {  // a raw page (or a released one: zeros, never visible) against the unrotated q
      copy_page_sync<kD>(e8_page(kv, ek), kD, 0, raw, lane, 32);
      __syncwarp();
      uint32_t qa[kD / 16][4];
      query_fragments<kD>(P.q + tr.q_off, tr.valid, kD, qa);
      float s4[2][2][4];
      block_scores<kD>(raw, qa, s4);
      sum_score_parts(s4, sc);
      __syncwarp();  // the tile is read: V may take it
    }
    rescale(softmax_weights(sc, b, tr.pos, tr.lo, m, l, P.a, p));
    if (kv_entry_is_slot(ev)) {
      e8_block_values<kD>(stg + Geo::kSlotK, p, VL, o, oz);
    } else {
      copy_page_sync<kD>(e8_page(kv, ev), kD, 0, raw, lane, 32);
      __syncwarp();
      zero_rows_past_end<kD>(raw, len - b * KV_BLOCK_TOKENS, lane);
      raw_block_values<kD>(raw, p, o);
    }
  };
  e8_stream<kD>(kv, s, kvh, b_first, b_end, b_step, wbase, block);
}

// This warp's value accumulators folded: the parts summed (columns n and n + 4 sit on lanes t and
// t ^ 2; the latter scaled by kLoScale), each group's bracket added to its channels. Lane (g,
// t < 2) then holds rows 2t, 2t + 1 at channels 16 i + g (o[i][0..1]) and 16 i + g + 8.
template <int kD>
__device__ __forceinline__ void fold_e8_state(float (&o)[kD / 16][4], float (&oz)[4]) {
  const int tig = threadIdx.x & 3;
#pragma unroll
  for (int i = 0; i < kD / 16; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) o[i][c] += __shfl_xor_sync(kFull, o[i][c], 2) * (1.f / kLoScale);
  float zt[2];
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    oz[c] += __shfl_xor_sync(kFull, oz[c], 2) * (1.f / kLoScale);
    oz[2 + c] += __shfl_xor_sync(kFull, oz[2 + c], 2) * (1.f / kLoScale);
    zt[c] = oz[c] + oz[2 + c] * (1.f / kLoScale);  // lanes g = a: Σ p (z + 3/2 D) of group a
  }
#pragma unroll
  for (int i = 0; i < kD / 16; ++i)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const float z = __shfl_sync(kFull, zt[c], 4 * (i / 2) + tig);  // m-tile i is in group i / 2
      o[i][c] += z;
      o[i][2 + c] += z;
    }
}

// This warp's state, folded, into the shared merge buffer (merge_decode's layout).
template <int kD>
__device__ __forceinline__ void store_e8_state(float* ws, int32_t dv, float m, float l, float (&o)[kD / 16][4],
                                               float (&oz)[4]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
  fold_e8_state<kD>(o, oz);
  float* w = ws + warp * kRowsPerTile * (dv + 2);
  if (tig < 2)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      float* wr = w + (2 * tig + c) * (dv + 2) + 2;
#pragma unroll
      for (int i = 0; i < kD / 16; ++i) {
        wr[16 * i + g] = o[i][c];
        wr[16 * i + g + 8] = o[i][2 + c];
      }
    }
  if (lane < 16 && tig == 0) {
    w[g * (dv + 2)] = m;
    w[g * (dv + 2) + 1] = l;
  }
}

// A prefill-sized sequence's rows r0 .. r0+3 of this warp, from run_rows_e8's state: folded
// (fold_e8_state), divided by the row's l (on lane 4 r for row r), written to the output.
template <int kD>
__device__ __forceinline__ void write_e8_rows(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t r0,
                                              int32_t n_rows, float l, float (&o)[kD / 16][4], float (&oz)[4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
  fold_e8_state<kD>(o, oz);
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int32_t rr = 2 * (tig & 1) + c;  // this lane's row of the M-tile (lanes t < 2 write)
    const float lr = __shfl_sync(kFull, l, 4 * rr);
    const int32_t R = r0 + rr;
    if (tig < 2 && R < n_rows) {
      float* op = out_row(P, s, kvh, R);
      const float inv = lr > 0.f ? 1.f / lr : 0.f;
#pragma unroll
      for (int i = 0; i < kD / 16; ++i) {
        op[16 * i + g] = o[i][c] * inv;
        op[16 * i + g + 8] = o[i][2 + c] * inv;
      }
    }
  }
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
        float o[kD / 16][4], oz[4], m, l;
        run_rows_e8<kD>(P, s, kvh, r0, n_rows, b0, b1, 1, wbase, tab, q_rows, has_slots, o, oz, m, l);
        write_e8_rows<kD>(P, s, kvh, r0, n_rows, l, o, oz);
      }
    }
    return;
  }
  const DecodeSplit ds = decode_split(s, n_rows, G, P.a.sliding_window, P.n_split, split);
  if (split >= min(ds.n_live, P.n_split)) return;  // block-uniform, before the first barrier
  // The rotated queries only when some block of this split is a slot (a short context is all
  // raw pages).
  bool slot = false;
  for (int32_t b = ds.B0 + (int32_t)threadIdx.x; b < ds.B1; b += kThreads) slot |= kv_entry_is_slot(__ldg(kent + b));
  const bool has_slots = __syncthreads_or(slot);
  pdl_begin();
  stamp(P.timeline, kStampFirst);

  const DecodeWarp dw = decode_warp(n_rows, ds);
  float o[kD / 16][4], oz[4], m, l;
  run_rows_e8<kD>(P, s, kvh, dw.r0, n_rows, dw.b_first, dw.b_end, dw.n_kg,
                  smem + Geo::kWarpsOff + warp * Geo::kWarpBytes, tab, q_rows, has_slots, o, oz, m, l);
  store_e8_state<kD>(warp_states(smem), kv.head_dim_v, m, l, o, oz);
  merge_decode<kD>(P, s, kvh, split, n_rows, ds, dw, smem);
}

// Shared bytes of the E8 kernel for head size kD (its buffers, or the merges' scratch if larger).
inline size_t e8_smem_bytes(int kD, int32_t n_split) {
  const size_t own = kD == 128 ? E8Geom<128>::kBytes : (kD == 64 ? E8Geom<64>::kBytes : E8Geom<32>::kBytes);
  const size_t merge_a = (size_t)kWarps * kRowsPerTile * (kD + 2) * sizeof(float);
  return std::max(own, std::max(merge_a, merge_bytes(n_split)));
}

}  // namespace gaacrt::cuda::attn
