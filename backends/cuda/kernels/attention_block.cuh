// attention_block.cuh — the per-block math of the tensor-core attention kernel (attention_mma.cuh)
// on one M-tile of 4 query rows: the query's A fragments in three bf16 parts, q·k of a block of 16
// keys, the online softmax and p·v (the header of attention_mma.cuh says why the parts sit in the
// A operand's rows). Shared by the decode path (run_rows) and the narrow prefill path
// (attention_prefill.cuh run_rows_shared).
#pragma once
#include <cmath>

#include "attention_args.cuh"
#include "attention_tiles.cuh"

namespace gaacrt::cuda::attn {
constexpr float kLog2e = 1.4426950408889634f;

// Plain stores into host-mapped memory (device atomics on it are not portable over PCIe); when
// several tiles are bad at once the report names one of them.
__device__ inline void record_corrupt(DeviceErrors* err, int32_t layer, int32_t head, int32_t block) {
  volatile DeviceErrors* e = err;
  e->layer = layer;
  e->head = head;
  e->block = block;
  __threadfence_system();
  e->code = 1;
}

// Query row R of sequence s (query token R / G, head R % G of kv-head kvh's group): its index,
// whether it exists, where its query vector starts in P.q, its position and the first key its
// window sees (-1 and 0 for a missing row: no key is visible).
struct TileRow {
  int32_t R;
  bool valid;
  int64_t q_off;
  int32_t pos, lo;
};
__device__ __forceinline__ TileRow query_row(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t R,
                                             int32_t n_rows) {
  const int32_t G = P.a.n_head / P.kv.n_head_kv;
  TileRow t;
  t.R = R;
  t.valid = t.R < n_rows;
  const int32_t i = t.valid ? t.R / G : 0, gq = t.valid ? t.R % G : 0;
  t.q_off = ((int64_t)(s.q_begin + i) * P.a.n_head + kvh * G + gq) * P.kv.head_dim_k;
  t.pos = t.valid ? s.pos0 + i : -1;
  t.lo = P.a.sliding_window > 0 ? max(0, t.pos - P.a.sliding_window + 1) : 0;
  return t;
}
// This lane's query row of an M-tile (rows r0 .. r0+3; lanes g and g + 4 share row r0 + g % 4).
__device__ __forceinline__ TileRow tile_row(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t r0,
                                            int32_t n_rows) {
  return query_row(P, s, kvh, r0 + (((threadIdx.x & 31) >> 2) & 3), n_rows);
}

// This lane's A fragments of its query row qv (dk channels; zeros past them or when !valid),
// split into three bf16 parts (see the header): rows g < 4 hold hi, g >= 4 mid, g + 8 lo.
template <int kD>
__device__ __forceinline__ void query_fragments(const float* qv, bool valid, int32_t dk, uint32_t (&qa)[kD / 16][4]) {
  const int lane = threadIdx.x & 31, tig = lane & 3;
  const bool upper = lane >= 16;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const int c = 16 * kk + 2 * tig;
    float x[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int ch = c + (u & 1) + 8 * (u >> 1);
      x[u] = valid && ch < dk ? qv[ch] : 0.f;
    }
    const Split3 p0 = split3(x[0], x[1]), p1 = split3(x[2], x[3]);
    qa[kk][0] = upper ? p0.mid : p0.hi;
    qa[kk][1] = upper ? 0u : p0.lo;
    qa[kk][2] = upper ? p1.mid : p1.hi;
    qa[kk][3] = upper ? 0u : p1.lo;
  }
}

// q·k of one block of 16 keys for this lane's query row: keys 0-7 (s[0]) and 8-15 (s[1]), two
// chains each (even / odd k-steps) for latency. Split from block_rest so that a GAAC warp can
// decode V while these mma.sync are in flight.
template <int kD>
__device__ __forceinline__ void block_scores(const uint16_t* kt, const uint32_t (&qa)[kD / 16][4], float (&s)[2][2][4]) {
  constexpr int kRow = TileGeom<kD>::kRow, kKs = kD / 16;
  const int lane = threadIdx.x & 31, mi = lane >> 3, ri = lane & 7;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int c = 0; c < 2; ++c)
#pragma unroll
      for (int x = 0; x < 4; ++x) s[n][c][x] = 0.f;
  const uint16_t* kp = kt + (8 * (mi >> 1) + ri) * kRow + 8 * (mi & 1);
#pragma unroll
  for (int kk = 0; kk < kKs; ++kk) {
    uint32_t r[4];
    ldmatrix_x4(r, kp + 16 * kk);
    mma_bf16(s[0][kk & 1], qa[kk], r[0], r[1]);
    mma_bf16(s[1][kk & 1], qa[kk], r[2], r[3]);
  }
}

// A block's q·k accumulators summed over the three parts, as this lane's scores of keys
// 2t, 2t+1, 2t+8, 2t+9 (t = lane % 4). Parts: rows g (hi on lanes < 16, mid on lanes >= 16) and
// g + 8 (lo, or zero rows): own two plus the partner lane's two. Both lanes get the same bits
// (a + b == b + a).
__device__ __forceinline__ void sum_score_parts(const float (&s)[2][2][4], float (&sc)[4]) {
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const float x = (s[n][0][c] + s[n][1][c]) + (s[n][0][c + 2] + s[n][1][c + 2]);
      sc[2 * n + c] = x + __shfl_xor_sync(kFull, x, 16);
    }
}

// 2^x for the softmax (MUFU.EX2, flushing subnormal results to 0: exp2f's subnormal path costs
// three instructions per call; a weight below 2^-126 of the row's largest is nothing).
__device__ __forceinline__ float exp2_ftz(float x) {
#if defined(GAACRT_CUDA_EMULATION)
  const float y = exp2f(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.f : y;
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

// Online softmax step of kN consecutive blocks b .. b + kN - 1 of 16 keys (visible keys lo..pos;
// log2 domain: m and the scores are in units of log2): masks and scales this lane's scores sc
// (block b + i's in sc[4i .. 4i + 3]), turns them into the weights p, updates m and l and returns
// the factor the row's accumulators must be scaled by. (kN = 2: the wide prefill's steps of 32
// keys, attention_wide.cuh; one maximum, one exponent of the correction and one pair of sums'
// shuffles for both blocks.)
template <int kN = 1>
__device__ __forceinline__ float softmax_weights(float (&sc)[4 * kN], int32_t b, int32_t pos, int32_t lo, float& m,
                                                 float& l, const AttentionArgs& a, float (&p)[4 * kN]) {
  const int tig = threadIdx.x & 3;
  const int32_t b0 = b * KV_BLOCK_TOKENS, kb = b0 + 2 * tig;
  // Every key of the blocks visible to this row (all blocks of a decode step but the newest and,
  // with a sliding window, the oldest): no per-key mask.
  const bool all_visible = b0 >= lo && b0 + kN * KV_BLOCK_TOKENS - 1 <= pos;
  float bmax = -INFINITY;
  // One branch for all the scores: a test per score cut the step into a basic block per score
  // (16 in a two-block step of the wide prefill), which the compiler could not schedule across
  // (pp512 after 32K on an H100: 3,483 -> 3,882 tok/s with this alone, the seventeenth session).
  if (a.softcap > 0.f) {
#pragma unroll
    for (int j = 0; j < 4 * kN; ++j) sc[j] = a.softcap * tanhf(sc[j] * a.scale / a.softcap) * kLog2e;
  } else {
#pragma unroll
    for (int j = 0; j < 4 * kN; ++j) sc[j] = sc[j] * a.scale * kLog2e;
  }
  if (!all_visible) {
#pragma unroll
    for (int j = 0; j < 4 * kN; ++j) {
      const int32_t key = kb + KV_BLOCK_TOKENS * (j >> 2) + (j & 1) + 8 * ((j >> 1) & 1);
      // A select, not arithmetic: rows past the newest token of a raw page may hold NaN patterns.
      if (key < lo || key > pos) sc[j] = -INFINITY;
    }
  }
#pragma unroll
  for (int j = 0; j < 4 * kN; ++j) bmax = fmaxf(bmax, sc[j]);
  bmax = fmaxf(bmax, __shfl_xor_sync(kFull, bmax, 1));
  bmax = fmaxf(bmax, __shfl_xor_sync(kFull, bmax, 2));
  const float mn = fmaxf(m, bmax), mref = mn == -INFINITY ? 0.f : mn;
  const float corr = exp2_ftz(m - mref);  // 0 until the first visible key (m = -inf); 2^0 = 1 exactly
  float rs = 0.f;
#pragma unroll
  for (int j = 0; j < 4 * kN; ++j) {
    p[j] = exp2_ftz(sc[j] - mref);
    rs += p[j];
  }
  rs += __shfl_xor_sync(kFull, rs, 1);
  rs += __shfl_xor_sync(kFull, rs, 2);
  l = l * corr + rs;
  m = mn;
  return corr;
}

// softmax_weights, then o rescaled (this lane's accumulators are all of its own row).
template <int kD>
__device__ __forceinline__ float softmax_block(float (&sc)[4], int32_t b, int32_t pos, int32_t lo,
                                               float (&o)[kD / 8][4], float& m, float& l, const AttentionArgs& a,
                                               float (&p)[4]) {
  const float corr = softmax_weights(sc, b, pos, lo, m, l, a, p);
  // Rescale only when some row's maximum moved (after the first blocks, rarely): x * 1 == x, so
  // skipping is exact.
  if (__any_sync(kFull, corr != 1.f)) {
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) o[nt][c] *= corr;
  }
  return corr;
}

// Weights w of this lane's keys (2t, 2t+1, 2t+8, 2t+9) as the A operand of p·v, in three parts:
// the score accumulators' layout is the A layout.
__device__ __forceinline__ void weights_a(const float (&w)[4], uint32_t (&pf)[4]) {
  const bool upper = (threadIdx.x & 31) >= 16;
  const Split3 pa = split3(w[0], w[1]), pb = split3(w[2], w[3]);
  pf[0] = upper ? pa.mid : pa.hi;
  pf[1] = upper ? 0u : pa.lo;
  pf[2] = upper ? pb.mid : pb.hi;
  pf[3] = upper ? 0u : pb.lo;
}

// o += pf · V for the value columns of n-tile pairs np0 .. np1-1 (16 columns each; constants
// after unrolling) of a block's BF16 rows vt.
template <int kD>
__device__ __forceinline__ void pv_block(const uint32_t (&pf)[4], const uint16_t* vt, float (&o)[kD / 8][4],
                                         int np0 = 0, int np1 = kD / 16) {
  constexpr int kRow = TileGeom<kD>::kRow;
  const int lane = threadIdx.x & 31, mi = lane >> 3, ri = lane & 7;
  const uint16_t* vp = vt + (8 * (mi & 1) + ri) * kRow + 8 * (mi >> 1);
#pragma unroll
  for (int np = 0; np < kD / 16; ++np) {
    if (np < np0 || np >= np1) continue;
    uint32_t r[4];
    ldmatrix_x4_trans(r, vp + 16 * np);
    mma_bf16(o[2 * np], pf, r[0], r[1]);
    mma_bf16(o[2 * np + 1], pf, r[2], r[3]);
  }
}

// Online softmax and weighted values of one block of 16 keys, given its q·k accumulators.
template <int kD>
__device__ __forceinline__ void block_rest(const float (&s)[2][2][4], const uint16_t* vt, int32_t b, int32_t pos,
                                           int32_t lo, float (&o)[kD / 8][4], float& m, float& l,
                                           const AttentionArgs& a) {
  float sc[4], p[4];
  uint32_t pf[4];
  sum_score_parts(s, sc);
  softmax_block<kD>(sc, b, pos, lo, o, m, l, a, p);
  weights_a(p, pf);
  pv_block<kD>(pf, vt, o);
}

// Scores, online softmax and weighted values of one block of 16 keys.
template <int kD>
__device__ __forceinline__ void block_math(const uint16_t* kt, const uint16_t* vt, int32_t b, int32_t pos, int32_t lo,
                                           const uint32_t (&qa)[kD / 16][4], float (&o)[kD / 8][4], float& m,
                                           float& l, const AttentionArgs& a) {
  float s[2][2][4];
  block_scores<kD>(kt, qa, s);
  block_rest<kD>(s, vt, b, pos, lo, o, m, l, a);
}

// The newest block's rows past the last token were never written: a NaN there times p = 0 would
// still poison p·v, so zero those V rows (K's are masked by select). n_valid: rows written.
template <int kD>
__device__ __forceinline__ void zero_rows_past_end(uint16_t* vt, int32_t n_valid, int lane) {
  constexpr int kRow = TileGeom<kD>::kRow;
  if (n_valid < KV_BLOCK_TOKENS) {
    for (int x = lane; x < (KV_BLOCK_TOKENS - n_valid) * (kD / 8); x += 32)
      *reinterpret_cast<uint4*>(vt + (n_valid + x / (kD / 8)) * kRow + 8 * (x % (kD / 8))) = make_uint4(0, 0, 0, 0);
    __syncwarp();
  }
}

// A row's online-softmax state before its first block.
template <int kD>
__device__ __forceinline__ void reset_row_state(float (&o)[kD / 8][4], float& m, float& l) {
#pragma unroll
  for (int nt = 0; nt < kD / 8; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) o[nt][c] = 0.f;
  m = -INFINITY;
  l = 0.f;
}

}  // namespace gaacrt::cuda::attn
