// attention_wide.cuh — prefill-sized sequences in wide row groups: 16 query rows per warp, 64 per
// thread block, on one shared stream of K/V blocks (attention_prefill.cuh shared_stream).
//
// The narrow path (run_rows_shared) gives a warp an M-tile of 4 rows, the three bf16 parts of
// their fp32 queries in the 16 rows of the mma's A operand (attention_mma.cuh says why): a 16-row
// row group per thread block, every K/V block copied (and GAAC's decoded) once per 4 query tokens
// and read by ldmatrix once per 4 rows. At a deep context that re-reading bounds a prefill (pp512
// after 32K of the 8B shape on the H200: 1,171 tok/s, ~12 ms a layer in attention). Here the 16
// rows of the A operand are 16 real rows (rows g and g + 8 of lane l, g = l / 4: the usual
// flash-attention layout), and each part of the query (hi, mid, lo) is an mma of its own, into
// accumulators of its own, and so are the softmax weights' parts in p·v (wide_scores and wide_pv say how
// they are summed): about the precision of fp32 products again (3 x 8 significant bits), four
// times the rows per K/V read, and 3 mma per 16 rows where the narrow path spends 4. Different
// sums from the narrow path's, so different bits (within ~1e-6); the same for the BF16 and the
// GAAC cache (one kernel, the same stream). At head size 128 the default takes two blocks a step
// with two parts (hi, mid: 16 significant bits, ~3.4e-6 from the CPU; prefill_wide says why).
#pragma once
#include "attention_prefill.cuh"
#include "wgmma.cuh"

namespace gaacrt::cuda::attn {

constexpr int kWideRowsPerWarp = 16, kWideRows = kWarps * kWideRowsPerWarp;  // 64

// The first kP of split3's bf16 parts of x0, x1 into word j of each part: kP = 3 about fp32's 24
// significant bits, kP = 2 16 of them (more than llama.cpp's fp16 queries and weights; the
// two-block kernels, ~3.4e-6 from the CPU on an H100 against ~6e-7).
template <int kP>
__device__ __forceinline__ void split_parts(float x0, float x1, uint32_t (&f)[kP][4], int j) {
  static_assert(kP == 2 || kP == 3, "two or three bf16 parts");
  const Split3 sp = split3(x0, x1);
  f[0][j] = sp.hi;
  f[1][j] = sp.mid;
  if constexpr (kP == 3) f[2][j] = sp.lo;
}

// The A fragments of k-step kk of the warp's 16 query rows in kP bf16 parts, each part a whole
// operand: f[p] = {row g channels c, c+1; row g+8 c, c+1; row g c+8, c+9; row g+8 c+8, c+9},
// c = 16 kk + 2 (lane % 4); zeros past dk channels and for missing rows.
template <int kD, int kP = 3>
__device__ __forceinline__ void wide_query_step(const KernelArgs& P, const TileRow (&rw)[2], int kk,
                                                uint32_t (&f)[kP][4]) {
  const int tig = threadIdx.x & 3;
  const int32_t dk = P.kv.head_dim_k;
#pragma unroll
  for (int u = 0; u < 2; ++u)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int ch = 16 * kk + 2 * tig + 8 * u;
      const float* qv = P.q + rw[h].q_off;
      const float x0 = rw[h].valid && ch < dk ? qv[ch] : 0.f, x1 = rw[h].valid && ch + 1 < dk ? qv[ch + 1] : 0.f;
      split_parts<kP>(x0, x1, f, 2 * u + h);
    }
}

// All k-steps' fragments (qa[kk]), held for a whole stream of blocks.
template <int kD, int kP>
__device__ __forceinline__ void wide_query(const KernelArgs& P, const TileRow (&rw)[2],
                                           uint32_t (&qa)[kD / 16][kP][4]) {
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) wide_query_step<kD, kP>(P, rw, kk, qa[kk]);
}

// q·k of kN blocks of 16 keys (kt[i]: block i's BF16 rows) for the warp's 16 rows. The tensor
// cores add a product sum to the accumulator and truncate (not round) the fp32 result, so each
// query part gets accumulators of its own: s[i][p][n] holds block i's keys 8n .. 8n+7 (fragment e:
// row g + 8 (e / 2), key 8n + 2t + e % 2), summed in fp32 by wide_row_scores. frag(kk, f) returns
// k-step kk's fragments (held ones, or made in the scratch f), once for all kN blocks. (Two parts
// instead of three gave the same pp512 in one-block steps, the twelfth session, and +10% for BF16
// after 32K in two-block steps, the fifteenth: once a step's latency shrinks, the mma show.)
template <int kD, int kN, int kP = 3, class Frag>
__device__ __forceinline__ void wide_scores(const uint16_t* const (&kt)[kN], Frag&& frag, float (&s)[kN][kP][2][4]) {
  constexpr int kRow = TileGeom<kD>::kRow;
  const int lane = threadIdx.x & 31, mi = lane >> 3, ri = lane & 7;
#pragma unroll
  for (int i = 0; i < kN; ++i)
#pragma unroll
    for (int p = 0; p < kP; ++p)
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int x = 0; x < 4; ++x) s[i][p][n][x] = 0.f;
  const int off = (8 * (mi >> 1) + ri) * kRow + 8 * (mi & 1);
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t scratch[kP][4];
    const uint32_t(&f)[kP][4] = frag(kk, scratch);
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      uint32_t r[4];
      ldmatrix_x4(r, kt[i] + off + 16 * kk);
#pragma unroll
      for (int p = 0; p < kP; ++p) {
        mma_bf16(s[i][p][0], f[p], r[0], r[1]);
        mma_bf16(s[i][p][1], f[p], r[2], r[3]);
      }
    }
  }
}

// Row h's scores (this lane's keys 2t, 2t+1, 2t+8, 2t+9 of each block: block i's in sc[4i ..
// 4i + 3], the layout softmax_weights<kN> reads), the parts summed small first.
template <int kN, int kP = 3>
__device__ __forceinline__ void wide_row_scores(const float (&s)[kN][kP][2][4], int h, float (&sc)[4 * kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = j >> 1, e = 2 * h + (j & 1);
      float x = s[i][kP - 1][n][e];
#pragma unroll
      for (int p = kP - 2; p >= 0; --p) x += s[i][p][n][e];
      sc[4 * i + j] = x;
    }
}

// The weights w as kP bf16 parts of the A operand, block i's in pf[i] (wide_pv, wg_block_math).
template <int kN, int kP>
__device__ __forceinline__ void weight_parts(const float (&w)[2][4 * kN], uint32_t (&pf)[kN][kP][4]) {
#pragma unroll
  for (int i = 0; i < kN; ++i)
#pragma unroll
    for (int u = 0; u < 2; ++u)
#pragma unroll
      for (int h = 0; h < 2; ++h) split_parts<kP>(w[h][4 * i + 2 * u], w[h][4 * i + 2 * u + 1], pf[i], 2 * u + h);
}

// o += w · V of kN blocks' BF16 rows vt[i] for the warp's 16 rows (w[h]: row h's weights, block
// i's keys 2t, 2t+1, 2t+8, 2t+9 at 4i .., as the A operand {row g keys 2t, 2t+1; row g+8 the same;
// row g keys 2t+8, 2t+9; row g+8 the same}) in kP bf16 parts: the step's p·v gathers its
// parts in fresh accumulators, the small parts first, before one rounded add into o, so that the
// small parts are never truncated against the large sums (added straight into s and o, on the
// H200, the head-128 cases of test_cuda_prefill_attention_in_wide_row_groups_matches_cpu missed
// the CPU by more than their 2e-6; the emulation, which rounds, gave ~5e-7).
template <int kD, int kN, int kP = 3>
__device__ __forceinline__ void wide_pv(const uint16_t* const (&vt)[kN], const float (&w)[2][4 * kN],
                                        float (&o)[kD / 8][4]) {
  constexpr int kRow = TileGeom<kD>::kRow;
  const int lane = threadIdx.x & 31, mi = lane >> 3, ri = lane & 7;
  uint32_t pf[kN][kP][4];
  weight_parts<kN, kP>(w, pf);
  const int off = (8 * (mi & 1) + ri) * kRow + 8 * (mi >> 1);
#pragma unroll
  for (int np = 0; np < kD / 16; ++np) {
    uint32_t r[kN][4];
#pragma unroll
    for (int i = 0; i < kN; ++i) ldmatrix_x4_trans(r[i], vt[i] + off + 16 * np);
    float t[2][4] = {};  // this step's p·v, the small parts first
#pragma unroll
    for (int p = kP - 1; p >= 0; --p)
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        mma_bf16(t[0], pf[i][p], r[i][0], r[i][1]);
        mma_bf16(t[1], pf[i][p], r[i][2], r[i][3]);
      }
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      o[2 * np][x] += t[0][x];
      o[2 * np + 1][x] += t[1][x];
    }
  }
}

// Both rows' accumulators rescaled by their softmax factors (skipped when neither moved: x * 1
// == x, exact).
template <int kD>
__device__ __forceinline__ void wide_rescale(float (&o)[kD / 8][4], const float (&corr)[2]) {
  if (__any_sync(kFull, corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt) {
      o[nt][0] *= corr[0];
      o[nt][1] *= corr[0];
      o[nt][2] *= corr[1];
      o[nt][3] *= corr[1];
    }
  }
}

// The online softmax of a step's scores s (wide_scores' layout): both rows' weights w, m and l
// updated, and the factors corr o must be scaled by (wide_softmax: o rescaled too).
template <int kN, int kP>
__device__ __forceinline__ void wide_weights(const float (&s)[kN][kP][2][4], int32_t b, const TileRow (&rw)[2],
                                             float (&m)[2], float (&l)[2], const AttentionArgs& a,
                                             float (&w)[2][4 * kN], float (&corr)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sc[4 * kN];
    wide_row_scores<kN, kP>(s, h, sc);
    corr[h] = softmax_weights<kN>(sc, b, rw[h].pos, rw[h].lo, m[h], l[h], a, w[h]);
  }
}
template <int kD, int kN, int kP>
__device__ __forceinline__ void wide_softmax(const float (&s)[kN][kP][2][4], int32_t b, const TileRow (&rw)[2],
                                             float (&o)[kD / 8][4], float (&m)[2], float (&l)[2],
                                             const AttentionArgs& a, float (&w)[2][4 * kN]) {
  float corr[2];
  wide_weights<kN, kP>(s, b, rw, m, l, a, w, corr);
  wide_rescale<kD>(o, corr);
}

// Scores, online softmax and weighted values of kN blocks b .. b + kN - 1 (16 keys each; rows
// that see none of a block's keys mask them) for the warp's 16 rows.
template <int kD, int kN, int kP>
__device__ __forceinline__ void wide_block_math(const uint16_t* const (&kt)[kN], const uint16_t* const (&vt)[kN],
                                                int32_t b, const TileRow (&rw)[2],
                                                const uint32_t (&qa)[kD / 16][kP][4], float (&o)[kD / 8][4],
                                                float (&m)[2], float (&l)[2], const AttentionArgs& a) {
  float s[kN][kP][2][4];
  wide_scores<kD, kN, kP>(kt, [&](int kk, uint32_t(&)[kP][4]) -> const uint32_t(&)[kP][4] { return qa[kk]; }, s);
  float w[2][4 * kN];
  wide_softmax<kD, kN, kP>(s, b, rw, o, m, l, a, w);
  wide_pv<kD, kN, kP>(vt, w, o);
}

// ---- the same steps on Hopper's warpgroup mma (wgmma.cuh: sm_90a, head size 128, BF16 pages) ---
// The thread block's four warps are one warpgroup and its 64 rows one wgmma M. q·k of a step's
// 16 kN keys is one m64n(16 kN)k16 per k-step and query part (A: the held fragments qa; B: the
// step's K in the wgmma step tile, attention_tiles.cuh issue_bf16_step_tile), p·v one m64n64k16
// per 64 channels, block and weight part (A: the weights' parts; B: the step's V, read
// transposed): no ldmatrix, and a wgmma per 64 rows where mma.sync takes 8 per warp.
// wgmma runs asynchronously, so a step's p·v waits (its weights held in WgHeld) until the next
// step's q·k has been issued: the tensor cores multiply the two while the warps work out the next
// softmax (FlashAttention-3's overlap within a warpgroup; the ring keeps the held step's V: eight
// stages, attention_prefill.cuh). The sums are wide_block_math's in its order — fresh accumulators
// per query part, summed small part first; p·v's parts gathered small first in fresh
// accumulators, added into o before o is rescaled for the next step, as there: on an H100 the same
// bits as mma.sync's (attention.cu says where that was checked, and why BF16 and GAAC share this
// kernel all the same). Every warp takes every step (a warpgroup issues each wgmma together): a
// step none of a warp's rows can see is masked to weight 0, which leaves its m, l and o exactly as
// they were.
template <int kP>
struct WgHeld {
  const uint8_t* tile;    // the held step's tile (its V at tile + wg_tile_bytes(2))
  int n;                  // its blocks (0: none held)
  uint32_t pf[2][kP][4];  // its weights' parts, block i's in pf[i] (weight_parts)
};

// Issues q·k of a step's kN blocks into s (wide_scores' layout; each part's first k-step
// starts its accumulators: scale-d 0).
template <int kD, int kN, int kP>
__device__ __forceinline__ void wg_issue_qk(const uint8_t* tile, const uint32_t (&qa)[kD / 16][kP][4],
                                            float (&s)[kN][kP][2][4]) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    // Channels 16 kk .. 16 kk + 15: chunk columns 2 kk, 2 kk + 1 (LBO: the next 8 channels, 512
    // bytes on; SBO: the next 8 keys, 128 bytes on).
    const uint64_t desc = wg_desc(tile + 1024 * kk, 512, 128);
#pragma unroll
    for (int p = 0; p < kP; ++p) {
      if constexpr (kN == 2) wgmma_n32(s[0][p][0], s[0][p][1], s[1][p][0], s[1][p][1], qa[kk][p], desc, kk > 0);
      else wgmma_n16(s[0][p][0], s[0][p][1], qa[kk][p], desc, kk > 0);
    }
  }
  wgmma_commit();
}

// Issues p·v of the first kH blocks of a kN-block step tile (their weights' parts pf[i]) for
// channels 64 half .. 64 half + 63 into fresh accumulators t, the small parts first. (Block counts
// are template arguments throughout: a wgmma issued under a run-time branch, its accumulators
// waited for after it, makes ptxas serialize every wgmma of the kernel.)
template <int kN, int kH, int kP, int kPN>
__device__ __forceinline__ void wg_issue_pv(const uint8_t* tile, const uint32_t (&pf)[kPN][kP][4], int half,
                                            float (&t)[8][4]) {
  static_assert(kH <= kPN && kH <= kN, "weights for every block issued");
  constexpr uint32_t kCol = wg_col_bytes(kN);
  wgmma_fence();
#pragma unroll
  for (int p = kP - 1; p >= 0; --p)
#pragma unroll
    for (int i = 0; i < kH; ++i)  // block i's keys: rows 16 i .. of the tile (LBO: the next 8 keys,
      // 128 bytes on; SBO: the next 8 channels, a column of the tile on)
      wgmma_n64<true>(t, pf[i][p], wg_desc(tile + wg_tile_bytes(kN) + 256 * i + 8 * kCol * half, 128, kCol),
                      p != kP - 1 || i > 0);
  wgmma_commit();
}

// o's channels 64 half .. += t, once every wgmma issued has landed.
template <int kD>
__device__ __forceinline__ void wg_add(float (&o)[kD / 8][4], float (&t)[8][4], int half) {
  wgmma_wait<0>();
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    wg_pin(t[nt]);
#pragma unroll
    for (int x = 0; x < 4; ++x) o[8 * half + nt][x] += t[nt][x];
  }
}

// The held step's p·v (kH blocks) into o, nothing held after (the end of a row group's stream).
template <int kD, int kH, int kP>
__device__ __forceinline__ void wg_flush(WgHeld<kP>& h, float (&o)[kD / 8][4]) {
#pragma unroll
  for (int half = 0; half < kD / 64; ++half) {
    float t[8][4];
    wg_issue_pv<2, kH>(h.tile, h.pf, half, t);
    wg_add<kD>(o, t, half);
  }
  h.n = 0;
}

// A step of kN blocks b .. with kH = h.n blocks held (0 at a stream's start): its q·k, the held
// step's p·v (the first 64 channels) behind it; its softmax; the held step's p·v into o, o
// rescaled; its own weights held.
template <int kD, int kN, int kH, int kP>
__device__ __forceinline__ void wg_block_math(const uint8_t* tile, int32_t b, const TileRow (&rw)[2],
                                              const uint32_t (&qa)[kD / 16][kP][4], float (&o)[kD / 8][4],
                                              float (&m)[2], float (&l)[2], const AttentionArgs& a, WgHeld<kP>& h) {
  static_assert(kD == 128 && (kN == 1 || kN == 2) && kH >= 0 && kH <= 2, "the step tile: head size 128");
  float s[kN][kP][2][4], t[8][4];
  wg_issue_qk<kD, kN, kP>(tile, qa, s);
  if constexpr (kH > 0) {
    wg_issue_pv<2, kH>(h.tile, h.pf, 0, t);
    wgmma_wait<1>();  // groups complete in order: the q·k has landed
  } else {
    wgmma_wait<0>();
  }
#pragma unroll
  for (int i = 0; i < kN; ++i)
#pragma unroll
    for (int p = 0; p < kP; ++p) {
      wg_pin(s[i][p][0]);
      wg_pin(s[i][p][1]);
    }
  float w[2][4 * kN], corr[2];
  wide_weights<kN, kP>(s, b, rw, m, l, a, w, corr);
  if constexpr (kH > 0) {
    wg_add<kD>(o, t, 0);
    wg_issue_pv<2, kH>(h.tile, h.pf, 1, t);
    wg_add<kD>(o, t, 1);
  }
  wide_rescale<kD>(o, corr);
  h.tile = tile;
  h.n = kN;
  weight_parts<kN, kP>(w, *reinterpret_cast<uint32_t(*)[kN][kP][4]>(&h.pf));
}

// wg_block_math for a step of n blocks, h.n held: a uniform branch to each case's own code.
// (Only a stream's last step has one block, so one is never held before a step.)
template <int kD, int kP>
__device__ __forceinline__ void wg_step(const uint8_t* tile, int32_t b, int n, const TileRow (&rw)[2],
                                        const uint32_t (&qa)[kD / 16][kP][4], float (&o)[kD / 8][4], float (&m)[2],
                                        float (&l)[2], const AttentionArgs& a, WgHeld<kP>& h) {
  if (n == 2) {
    if (h.n == 2) wg_block_math<kD, 2, 2, kP>(tile, b, rw, qa, o, m, l, a, h);
    else wg_block_math<kD, 2, 0, kP>(tile, b, rw, qa, o, m, l, a, h);
  } else {
    if (h.n == 2) wg_block_math<kD, 1, 2, kP>(tile, b, rw, qa, o, m, l, a, h);
    else wg_block_math<kD, 1, 0, kP>(tile, b, rw, qa, o, m, l, a, h);
  }
}
template <int kD, int kP>
__device__ __forceinline__ void wg_finish(WgHeld<kP>& h, float (&o)[kD / 8][4]) {
  if (h.n == 2) wg_flush<kD, 2, kP>(h, o);
  else if (h.n == 1) wg_flush<kD, 1, kP>(h, o);
}

// ---- four-block steps on the warpgroup mma: 64 keys between two barriers, nothing held ---------
// q·k of 64 keys is one m64n64k16 per k-step and query part (B K-major: LBO the next 8 channels,
// wg_col_bytes(4) = 1 KiB on; SBO the next 8 keys, 128 bytes on), all into one set of
// accumulators, the small part's k-steps first; p·v one m64n64k16 per 64 channels, block and
// weight part (B = V, MN-major: LBO the next 8 keys, SBO the next 8 channels), the parts gathered
// small first in fresh accumulators, added into o (as wide_pv). The step waits for its own p·v:
// the other thread block on the SM keeps the tensor cores busy meanwhile.
// (One score accumulator where wide_scores keeps one per part: the same distance from the CPU on an
// H100 — 3.46e-6 after 4,000 keys, 5.93e-6 with scores four times as spread, as with one per part —
// 32 registers fewer, and pp512 after 32K 4,391 / 4,414 tok/s against 4,365 / 4,374. Both p·v
// halves in flight at once spilled and gave 4,364 / 4,390. The nineteenth session.)
template <int kD, int kN, int kP>
__device__ __forceinline__ void wg_block_math_flat(const uint8_t* tile, int32_t b, const TileRow (&rw)[2],
                                                   const uint32_t (&qa)[kD / 16][kP][4], float (&o)[kD / 8][4],
                                                   float (&m)[2], float (&l)[2], const AttentionArgs& a) {
  static_assert(kD == 128 && kN == 4, "the step tile: head size 128, four blocks");
  constexpr uint32_t kCol = wg_col_bytes(kN);
  float s[2 * kN][4];  // keys 8 j .. 8 j + 7 (block j / 2), fragment e: row g + 8 (e / 2), key 8 j + 2t + e % 2
  wgmma_fence();
#pragma unroll
  for (int p = kP - 1; p >= 0; --p)
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk)  // channels 16 kk ..: chunk columns 2 kk, 2 kk + 1
      wgmma_n64<false>(s, qa[kk][p], wg_desc(tile + 2 * kCol * kk, kCol, 128), p != kP - 1 || kk > 0);
  wgmma_commit();
  wgmma_wait<0>();
#pragma unroll
  for (int j = 0; j < 2 * kN; ++j) wg_pin(s[j]);
  float w[2][4 * kN], corr[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sc[4 * kN];  // wide_row_scores' layout: block i's keys 2t, 2t+1, 2t+8, 2t+9 at 4 i ..
#pragma unroll
    for (int i = 0; i < kN; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) sc[4 * i + j] = s[2 * i + (j >> 1)][2 * h + (j & 1)];
    corr[h] = softmax_weights<kN>(sc, b, rw[h].pos, rw[h].lo, m[h], l[h], a, w[h]);
  }
  wide_rescale<kD>(o, corr);
  uint32_t pf[kN][kP][4];
  weight_parts<kN, kP>(w, pf);
#pragma unroll
  for (int half = 0; half < kD / 64; ++half) {
    float t[8][4];
    wg_issue_pv<kN, kN>(tile, pf, half, t);
    wg_add<kD>(o, t, half);
  }
}

// Row h's output: o / l (rows g, g + 8 of this lane: o[nt][2h], o[nt][2h + 1] at channels
// 8 nt + 2t, + 1).
template <int kD>
__device__ __forceinline__ void wide_write_rows(const KernelArgs& P, const AttnSeq& s, int32_t kvh,
                                                const TileRow (&rw)[2], const float (&o)[kD / 8][4],
                                                const float (&l)[2]) {
  const int tig = threadIdx.x & 3;
  const int32_t dv = P.kv.head_dim_v;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (!rw[h].valid) continue;
    float* op = out_row(P, s, kvh, rw[h].R);
    const float inv = l[h] > 0.f ? 1.f / l[h] : 0.f;
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt) {
      const int ch = 8 * nt + 2 * tig;
      if (ch < dv) op[ch] = o[nt][2 * h] * inv;
      if (ch + 1 < dv) op[ch + 1] = o[nt][2 * h + 1] * inv;
    }
  }
}

// Thread block `split` takes row groups split, split + gridDim.x, ... of 64 rows of sequence s, on
// the shared stream in steps of kStep blocks (1, or 2: 32 keys between two of its barriers, one
// softmax step for both blocks, their q·k and p·v chains side by side: the default at head size
// 128 in the three-block build, kernels of their own), with kP bf16 parts of the queries and
// weights (3; 2 in the two-block kernels: with three, pp512 after 32K on an H100 was 10% lower
// for BF16 and 7% for GAAC).
// A step that reaches past this warp's blocks masks the keys its rows cannot see (weight 0 on the
// group's staged rows, real cache rows, or zeros past the newest token); a stream of an odd length
// ends with a one-block step.
// kWg (= kStep): the steps on the warpgroup mma, BF16 pages of head size 128 in the wgmma step
// tile, every warp on every step: two blocks with the step before held (wg_block_math), or four
// (wg_block_math_flat; a stream's last step padded with zero-filled blocks, masked).
template <int kD, bool kGaac, int kB, int kStep, int kP = 3, int kWg = 0>
__device__ __forceinline__ void prefill_wide(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t split,
                                             int32_t n_rows, uint8_t* smem, const GaacLanes& GL,
                                             const GaacU32x2 (&b3)[TileGeom<kD>::kRounds],
                                             const GaacU32x2 (&b4)[TileGeom<kD>::kRounds]) {
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2;
  const int32_t G = P.a.n_head / P.kv.n_head_kv, W = P.a.sliding_window;
  for (int32_t rg = split; rg * kWideRows < n_rows; rg += gridDim.x) {
    const int32_t g0 = rg * kWideRows, r0 = g0 + kWideRowsPerWarp * warp;
    int32_t B0, B1, b0 = 0, b1 = 0;  // the group's blocks, and this warp's (none past the rows)
    row_blocks(s, G, W, g0, min(n_rows, g0 + kWideRows) - 1, B0, B1);
    if (r0 < n_rows) row_blocks(s, G, W, r0, min(n_rows, r0 + kWideRowsPerWarp) - 1, b0, b1);
    const TileRow rw[2] = {query_row(P, s, kvh, r0 + g, n_rows), query_row(P, s, kvh, r0 + g + 8, n_rows)};
    float o[kD / 8][4], m[2], l[2];
    uint32_t qa[kD / 16][kP][4];
    WgHeld<kP> held;  // kWg: the step whose p·v is still to run
    held.n = 0;
    static_assert(!kWg || (kStep == kWg && !kGaac), "the wgmma steps: BF16 pages");
    shared_stream<kD, kGaac, kB, kStep, kWg>(
        P, s, kvh, B0, B1, smem, GL, b3, b4,
        [&] {
#pragma unroll
          for (int nt = 0; nt < kD / 8; ++nt)
#pragma unroll
            for (int c = 0; c < 4; ++c) o[nt][c] = 0.f;
          m[0] = m[1] = -INFINITY;
          l[0] = l[1] = 0.f;
          wide_query<kD, kP>(P, rw, qa);
        },
        [&](const uint16_t* const (&kt)[kStep], const uint16_t* const (&vt)[kStep], int32_t b, int n) {
          if constexpr (kWg == 4) {  // every step four blocks (padded): its wgmma sizes are constants
            wg_block_math_flat<kD, 4, kP>(reinterpret_cast<const uint8_t*>(kt[0]), b, rw, qa, o, m, l, P.a);
            return;
          } else if constexpr (kWg == 2) {  // n is block-uniform: the warpgroup issues its wgmma together
            const uint8_t* tile = reinterpret_cast<const uint8_t*>(kt[0]);
            wg_step<kD, kP>(tile, b, n, rw, qa, o, m, l, P.a, held);
            return;
          }
          if constexpr (kStep > 1) {
            if (n == kStep) {
              if (b + kStep > b0 && b < b1) wide_block_math<kD, kStep, kP>(kt, vt, b, rw, qa, o, m, l, P.a);
              return;
            }
          }
          const uint16_t* const k1[1] = {kt[0]};  // a step of one block
          const uint16_t* const v1[1] = {vt[0]};
          if (b >= b0 && b < b1) wide_block_math<kD, 1, kP>(k1, v1, b, rw, qa, o, m, l, P.a);
        },
        false);  // BF16 pages by cp.async (shared_stream)
    if constexpr (kWg == 2) wg_finish<kD, kP>(held, o);  // the last step's V is still staged
    wide_write_rows<kD>(P, s, kvh, rw, o, l);
  }
}

}  // namespace gaacrt::cuda::attn
