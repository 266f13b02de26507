// attention_split_k.cuh — split-K for decode-sized sequences, shared by the BF16/GAAC kernel
// (attention_mma.cuh) and the E8 kernel (attention_e8_mma.cuh): how a sequence's visible blocks
// are cut into one range per thread block (decode_split), how a thread block's warps deal them
// (decode_warp), and how the states meet again: the warps' in shared memory, then the splits'
// partials in global memory, merged by the last thread block of the (sequence, kv-head) to arrive
// (merge_decode, reduce_splits). Every order of summation is fixed by lengths alone, so a GAAC
// cache gives the BF16 cache's bits (attention_mma.cuh says why that matters).
#pragma once
#include <cmath>
#include <cstdint>

#include "../attention_timeline.h"
#include "attention_args.cuh"
#include "attention_ptx.cuh"

namespace gaacrt::cuda::attn {

// A decode-sized sequence's visible blocks [b_lo, b_hi) are cut into chunks of kChunkBlocks
// aligned to absolute block indices. Up to kOneSplitChunks chunks (256 keys) are one split: one
// thread block reads them all and writes the output itself, with no partials and no merge, whose
// latency exceeds what spreading so few blocks saves (H100, 128 keys back to back: BF16 5.0 µs
// one split, 6.5 split in two; twenty-eighth session). Longer ones are cut into n_split
// contiguous ranges of `per` chunks, at least min_chunks each (KernelArgs::min_split_chunks):
// split x reads blocks [B0, B1). The first n_live splits hold keys; the rest are empty.
struct DecodeSplit {
  int32_t B0, B1, n_live;
};
__device__ __forceinline__ DecodeSplit decode_split(const AttnSeq& s, int32_t n_rows, int32_t G, int32_t W,
                                                    int32_t n_split, int32_t min_chunks, int32_t split) {
  const int32_t p_last = s.pos0 + (n_rows - 1) / G;
  const int32_t b_lo = (W > 0 ? max(0, s.pos0 - W + 1) : 0) / KV_BLOCK_TOKENS, b_hi = p_last / KV_BLOCK_TOKENS + 1;
  const int32_t c0 = b_lo / kChunkBlocks, n = (b_hi - 1) / kChunkBlocks + 1 - c0;  // first chunk, chunks
  const int32_t per = n <= kOneSplitChunks ? kOneSplitChunks : max(min_chunks, (n + n_split - 1) / n_split);
  return DecodeSplit{max(b_lo, (c0 + split * per) * kChunkBlocks), min(b_hi, (c0 + (split + 1) * per) * kChunkBlocks),
                     (n + per - 1) / per};
}

// Decode-sized sequences: the warps of a thread block as (M-tile of 4 rows, key group): n_mt
// M-tiles (3 run as 4), n_kg = 4 / n_mt key groups dealing this split's blocks round-robin. This
// warp runs rows r0.. over blocks b_first, b_first + n_kg, ... below b_end (none when its M-tile
// has no rows); finish_decode merges in the same order.
struct DecodeWarp {
  int n_mt, n_kg;
  int32_t r0, b_first, b_end;
};
__device__ __forceinline__ DecodeWarp decode_warp(int32_t n_rows, const DecodeSplit& ds) {
  const int warp = threadIdx.x >> 5;
  DecodeWarp w;
  w.n_mt = (n_rows + kRowsPerTile - 1) / kRowsPerTile;
  if (w.n_mt == 3) w.n_mt = 4;
  w.n_kg = kWarps / w.n_mt;
  w.r0 = kRowsPerTile * (warp % w.n_mt);
  w.b_first = ds.B0 + warp / w.n_mt;
  w.b_end = w.r0 < n_rows ? ds.B1 : ds.B0;
  return w;
}

// Decode-sized sequences, after each warp ran its M-tile over its key group: the warps' states
// (m, l, O of their 4 rows) meet in shared memory [warp][4 rows][dv + 2], are merged in key-group
// order, then the thread block writes either the output (one live split) or its partial, and the
// last thread block of the (sequence, kv-head) to arrive merges every live split's partial in
// split order. Shared by the kernels of attention_mma.cuh and attention_e8_mma.cuh (the same
// merge order, so the same bits). In three steps: warp_states (every warp done; the buffer), each
// warp's store, merge_decode.
__device__ __forceinline__ float* warp_states(uint8_t* smem) {
  cp_async_wait<0>();
  __syncthreads();
  return reinterpret_cast<float*>(smem);
}

// This warp's state from the summed parts oc of run_rows (attention_block.cuh's key-row layout:
// row lane % 4, channels 16 mt + lane / 4 and + 8).
template <int kD>
__device__ __forceinline__ void store_warp_state(float* ws, int32_t dv, float m, float l,
                                                 const float (&oc)[kD / 16][2]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  float* w = ws + (warp * kRowsPerTile + (lane & 3)) * (dv + 2);
  if (g == 0) {
    w[0] = m;
    w[1] = l;
  }
#pragma unroll
  for (int mt = 0; mt < kD / 16; ++mt) {
    const int col = 16 * mt + g;  // columns col, col + 8
    if (col < dv) w[2 + col] = oc[mt][0];
    if (col + 8 < dv) w[2 + col + 8] = oc[mt][1];
  }
}

// The fused reduce: the last thread block of a (sequence, kv-head) merges its ns live splits'
// partials pu (row R of split sp at pu + (16 sp + R) part_row_floats(dv)) in split order and
// writes the output. A warp per row (rows warp, warp + 4, ...): lane j weighs splits j, j + 32, ...
// (M by a shuffle tree, f = 2^(m - M) into shared memory, L = its splits' l·f in order, then a
// shuffle tree) and sums columns 4j .. 4j + 3 (+ 128 per pass) of O over the splits in order, a
// float4 per split with kU splits' loads in flight (25: two trips for 49 splits; issuing the
// first batch before M is known took 30 more registers at head size 128, and the kernels built
// for three blocks per SM, which spill a few bytes either way, spilled ten times as much).
// The partials sit in L2, so what costs is round trips: the reduce before this one ran M and L
// as chains over the splits on a thread per row and summed four outputs eight splits at a time,
// seven trips for 49 splits. H200, 64K, 8 kv-heads, batch 1 (bench/cuda_attention_timeline.py):
// last arrival -> output 13.0 -> 4.6 µs; BF16 back to back 81.6 -> 75.5 µs, tg128 of the 8B shape
// at 64K +3.5% for BF16, GAAC and E8 alike (bench/results/cuda_h200.md, fifth session).
// kU: splits per batch (the kernels pass 25 at head size 128, whose register cap is the kernel's
// anyway, and 8 below it: 25 took the head-64 kernel from 165 to 196 registers, past the 168 at
// which three thread blocks fit an SM for prefill). ns <= kMaxSplits: attention.cu caps n_split.
template <int kU>
__device__ __forceinline__ void reduce_splits(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t n_rows,
                                              int ns, const float* pu, uint8_t* smem) {
  constexpr int kL = kMaxSplits / 32;  // splits per lane (M, L)
  const int32_t dv = P.kv.head_dim_v;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t stride = (int64_t)kRowsPerGroup * part_row_floats(dv);  // one split's row to the next's
  float* fw = reinterpret_cast<float*>(smem) + warp * ns;  // this warp's row's weights f (merge_bytes)
  for (int32_t R = warp; R < n_rows; R += kWarps) {
    const float* pr = pu + R * part_row_floats(dv);
    float4 v[kU];
    auto load = [&](int sp0, int c0) {  // columns c0 + 4 lane ..: inside the padded row while < dv
      const float4* p = reinterpret_cast<const float4*>(pr + kPartO + c0) + lane;
      const bool in = c0 + 4 * lane < dv;
#pragma unroll
      for (int u = 0; u < kU; ++u)
        v[u] = in && sp0 + u < ns ? __ldcg(p + (sp0 + u) * stride / 4) : make_float4(0.f, 0.f, 0.f, 0.f);
    };
    float mj[kL], lj[kL];
#pragma unroll
    for (int k = 0; k < kL; ++k) {
      const int sp = lane + 32 * k;
      mj[k] = sp < ns ? __ldcg(pr + sp * stride) : -INFINITY;
      lj[k] = sp < ns ? __ldcg(pr + sp * stride + 1) : 0.f;
    }
    float M = -INFINITY;
#pragma unroll
    for (int k = 0; k < kL; ++k) M = fmaxf(M, mj[k]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(kFull, M, o));
    float L = 0.f;
#pragma unroll
    for (int k = 0; k < kL; ++k) {
      const float f = mj[k] == -INFINITY ? 0.f : exp2f(mj[k] - M);
      if (lane + 32 * k < ns) fw[lane + 32 * k] = f;
      L += lj[k] * f;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(kFull, L, o);
    const float inv = L > 0.f ? 1.f / L : 0.f;
    __syncwarp();
    float* out = out_row(P, s, kvh, R);
    for (int c0 = 0; c0 < dv; c0 += 128) {
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int sp0 = 0; sp0 < ns; sp0 += kU) {
        load(sp0, c0);
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          if (sp0 + u >= ns) break;
          const float f = fw[sp0 + u];
          acc.x += v[u].x * f;
          acc.y += v[u].y * f;
          acc.z += v[u].z * f;
          acc.w += v[u].w * f;
        }
      }
      const float r[4] = {acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv};
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (c0 + 4 * lane + i < dv) out[c0 + 4 * lane + i] = r[i];
    }
    __syncwarp();  // fw is read: the warp's next row may overwrite it
  }
}

template <int kD>
__device__ __forceinline__ void merge_decode(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t split,
                                             int32_t n_rows, const DecodeSplit& ds, const DecodeWarp& dw,
                                             uint8_t* smem) {
  __shared__ int s_last;
  const KVLayerView& kv = P.kv;
  const int32_t dv = kv.head_dim_v;
  const int n_mt = dw.n_mt, n_kg = dw.n_kg;
  const int rs = dv + 2;
  const float* ws = reinterpret_cast<const float*>(smem);
  __syncthreads();
  stamp(P.timeline, kStampStreamed);
  const int64_t unit = (int64_t)blockIdx.z * kv.n_head_kv + kvh;
  // A row's key-group states are rows R, R + 4 n_mt, ... of ws. Threads split as (row, column
  // lane): tpr = 128 / (rows rounded up to a power of two) threads per row, each weighing the
  // row's groups once (M, f, L) and then taking columns j, j + tpr, ...: no division per element
  // (one per element cost ~200 instructions per thread at a short context, where this merge was
  // a third of the kernel's critical path). Same operations in the same order as a per-element
  // loop: the same bits.
  const int tpr = n_rows <= 1 ? 128 : (n_rows <= 2 ? 64 : (n_rows <= 4 ? 32 : (n_rows <= 8 ? 16 : 8)));
  const int R = threadIdx.x / tpr, j = threadIdx.x % tpr;
  if (R < n_rows) {
    const int stride = n_mt * kRowsPerTile * rs;
    const float* w0 = ws + R * rs;
    float M = -INFINITY;
    for (int k = 0; k < n_kg; ++k) M = fmaxf(M, w0[k * stride]);
    float f[kWarps], L = 0.f;
#pragma unroll
    for (int k = 0; k < kWarps; ++k) {
      const float m_k = k < n_kg ? w0[k * stride] : -INFINITY;
      f[k] = m_k == -INFINITY ? 0.f : exp2f(m_k - M);
      if (k < n_kg) L += w0[k * stride + 1] * f[k];
    }
    // One split holding every key writes the output itself; else this split's partial (M, L, O).
    const bool direct = ds.n_live == 1;
    float* op = direct ? out_row(P, s, kvh, R)
                       : P.part + ((unit * P.n_split + split) * kRowsPerGroup + R) * part_row_floats(dv) + kPartO;
    if (!direct && j == 0) {
      op[-kPartO] = M;
      op[1 - kPartO] = L;
    }
    for (int c = j; c < dv; c += tpr) {
      float acc = 0.f;
#pragma unroll
      for (int k = 0; k < kWarps; ++k)
        if (k < n_kg) acc += w0[k * stride + 2 + c] * f[k];
      op[c] = direct ? (L > 0.f ? acc / L : 0.f) : acc;
    }
    if (!direct && j < part_row_floats(dv) - kPartO - dv) op[dv + j] = 0.f;  // padding reduce_splits reads
  }
  if (ds.n_live == 1) return;

  // ---- fused reduce: the last thread block of this (sequence, kv-head) merges all splits ----
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(P.counters + unit, 1) == ds.n_live - 1;
  __syncthreads();
  stamp(P.timeline, kStampArrived);
  if (!s_last) return;
  __threadfence();
  const float* pu = P.part + unit * P.n_split * kRowsPerGroup * part_row_floats(dv);
  reduce_splits<kD >= 128 ? 25 : 8>(P, s, kvh, n_rows, ds.n_live, pu, smem);
  if (P.timeline) {  // (uniform) every warp's rows are written
    __syncthreads();
    stamp(P.timeline, kStampMerged);
  }
  if (threadIdx.x == 0) P.counters[unit] = 0;  // every block of this unit has arrived
}

// Shared bytes the fused reduce needs (reduce_splits: each warp's row's weights).
inline size_t merge_bytes(int32_t n_split) { return (size_t)kWarps * n_split * sizeof(float); }

}  // namespace gaacrt::cuda::attn
