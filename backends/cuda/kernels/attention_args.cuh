// attention_args.cuh — what the tensor-core attention kernels (attention_mma.cuh for BF16 and
// GAAC, attention_e8_mma.cuh for E8) are launched with: the thread block's shape, the split-K
// limits and the partials' layout, the per-SM build choices, and KernelArgs. The host
// (attention.cu) sizes grids and scratch from the same constants.
#pragma once
#include <cstdint>

#include "../attention_timeline.h"
#include "../cuda_backend.h"
#include "attention_tiles.cuh"

namespace gaacrt::cuda::attn {

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kRowsPerTile = 4, kRowsPerGroup = kWarps * kRowsPerTile;  // 16
constexpr int kChunkBlocks = 4;                                         // 64 tokens
constexpr int kOneSplitChunks = 4;  // decode: up to 256 keys in one split (attention_split_k.cuh decode_split)
// Beyond, decode splits of at least this many chunks (KernelArgs::min_split_chunks, attention.cu).
constexpr int kMinSplitChunks = 1;
constexpr int kMaxSplits = 128;  // attention.cu never splits a sequence wider
// A split's partial row in global memory (KernelArgs::part): m, l, two spare floats, then O padded
// to whole float4, so that the fused reduce reads O 16 bytes at a time.
constexpr int kPartO = 4;
__host__ __device__ constexpr int part_row_floats(int dv) { return kPartO + ((dv + 3) & ~3); }

// kB: thread blocks per SM the kernel is built for: 2, or 3 at head size 128 (attention.cu's
// default; GAACRT_CUDA_ATTN_BLOCKS_PER_SM=2 asks two), fitting a third block in registers (168) and
// shared memory (<= 75 KB) with two stages per warp and, for GAAC, V decoded into K's tile once
// q·k has read it: a third warp per scheduler hides GAAC's integer chains.
// Stages per warp (256-dim heads: two tiles per block) and GAAC's decoded tiles per warp (K and
// V, or one that V reuses), for the host's shared-memory sums and the kernel's carving alike.
__host__ __device__ constexpr int stage_count(int kD, int blocks) { return kD > 128 || blocks == 3 ? 2 : kStages; }
__host__ __device__ constexpr int decoded_tile_count(int blocks) { return blocks == 3 ? 1 : 2; }

struct KernelArgs {
  KVLayerView kv;
  AttentionArgs a;
  const AttnSeq* seqs;
  const float* q;
  float* out;
  float* part;         // [unit][n_split][16 rows][part_row_floats(dv)]: m, l, O of each thread block
  int32_t* counters;   // [unit] arrivals (zero between launches: the last block resets its own)
  int32_t n_split;
  uint32_t half_bytes;  // GAAC: staging bytes of one tile's slot
  GaacStaging gaac_stage;  // GAAC: K's and V's slot constants (attention_tiles.cuh)
  uint32_t warp_bytes;  // shared bytes of one warp's buffers
  DeviceErrors* err;
  int32_t bulk_min_blocks;  // BF16 pages: bulk copies for warps streaming at least this many blocks
  // 1: a launch of decode-sized sequences only, or any E8 launch, its grid kv-head fastest (x =
  // kv-head, y = split or E8 prefill row group): blocks go out in index order, so the live splits
  // (the first ones) spread over every SM before any takes a second. 0: x = split or prefill row
  // group, y = kv-head.
  int32_t head_fastest;
  uint64_t* timeline;  // attention_timeline.h: per-block stamps, or nullptr (the default)
  const float* q_rot;  // E8: the rotated queries [seq][kv-head][rot_rows][kD] (attention_lossy.cu)
  int32_t rot_rows;    // E8: rows per (sequence, kv-head) in q_rot (16, or a prefill's: lossy_ops.h)
  // 1: the launch's prefill-sized sequences in row groups of 64 (attention_wide.cuh; the kShared
  // kernels at head sizes up to 128), x = row group of 64, BF16 pages by cp.async; 0: row groups
  // of 16 (run_rows_shared / run_rows). The E8 kernel's (kPrefill): 1, row groups of 64
  // (attention_e8_wide.cuh), or 0.
  int32_t prefill_wide;
  // Decode splits of more than kOneSplitChunks chunks hold at least this many (attention_split_k.cuh
  // decode_split; attention.cu says why 1).
  int32_t min_split_chunks;
};

#ifdef __CUDACC__
// Row R (= query token R / G, head R % G of kv-head kvh's group) of sequence s's output.
__device__ __forceinline__ float* out_row(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t R) {
  const int32_t G = P.a.n_head / P.kv.n_head_kv;
  return P.out + ((int64_t)(s.q_begin + R / G) * P.a.n_head + kvh * G + R % G) * P.kv.head_dim_v;
}
#endif

}  // namespace gaacrt::cuda::attn
