// attention_block.cuh — the per-block math of the tensor-core attention kernel (attention_mma.cuh)
// on one M-tile of 4 query rows: q·k of a block of 16 keys, the online softmax and p·v, with the
// keys in the mma's rows and the query rows as columns (the last section; the decode path,
// run_rows, the narrow prefill path, attention_prefill.cuh run_rows_shared, and E8's decode path,
// attention_e8_mma.cuh run_rows_e8). Also the softmax the wide prefills share (softmax_weights).
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

// The scores in units of log2 (scaled, softcapped): one branch for all of them. A test per score
// cut a step into a basic block per score (16 in a two-block step of the wide prefill), which the
// compiler could not schedule across (pp512 after 32K on an H100: 3,483 -> 3,882 tok/s with this
// alone, the seventeenth session).
template <int kN>
__device__ __forceinline__ void log2_scores(float (&sc)[kN], const AttentionArgs& a) {
  if (a.softcap > 0.f) {
#pragma unroll
    for (int j = 0; j < kN; ++j) sc[j] = a.softcap * tanhf(sc[j] * a.scale / a.softcap) * kLog2e;
  } else {
#pragma unroll
    for (int j = 0; j < kN; ++j) sc[j] = sc[j] * a.scale * kLog2e;
  }
}

// Masks the scores of the keys this row cannot see (visible: lo .. pos) among the span keys from
// b0, score j's key being key(j): one test when every key of the span is visible (all blocks of a
// decode step but the newest and, with a sliding window, the oldest). A select, not arithmetic:
// rows past the newest token of a raw page may hold NaN patterns.
template <int kN, typename KeyOf>
__device__ __forceinline__ void mask_hidden_keys(float (&sc)[kN], int32_t b0, int32_t span, int32_t lo, int32_t pos,
                                                 KeyOf key) {
  if (b0 >= lo && b0 + span - 1 <= pos) return;
#pragma unroll
  for (int j = 0; j < kN; ++j) {
    const int32_t k = key(j);
    if (k < lo || k > pos) sc[j] = -INFINITY;
  }
}

// The online-softmax update of one row from this lane's kN scores of it (log2 units, masked),
// the row's other scores on the lanes that differ from this one in the bits of kSpread (xor
// shuffles, in a fixed order): the weights p, the new m and l, and the factor the row's
// accumulators must be scaled by.
template <int kN, int kSpread>
__device__ __forceinline__ float online_softmax(const float (&sc)[kN], float& m, float& l, float (&p)[kN]) {
  float bmax = -INFINITY;
#pragma unroll
  for (int j = 0; j < kN; ++j) bmax = fmaxf(bmax, sc[j]);
#pragma unroll
  for (int x = 1; x < 32; x <<= 1)
    if (kSpread & x) bmax = fmaxf(bmax, __shfl_xor_sync(kFull, bmax, x));
  const float mn = fmaxf(m, bmax), mref = mn == -INFINITY ? 0.f : mn;
  const float corr = exp2_ftz(m - mref);  // 0 until the first visible key (m = -inf); 2^0 = 1 exactly
  float rs = 0.f;
#pragma unroll
  for (int j = 0; j < kN; ++j) {
    p[j] = exp2_ftz(sc[j] - mref);
    rs += p[j];
  }
#pragma unroll
  for (int x = 1; x < 32; x <<= 1)
    if (kSpread & x) rs += __shfl_xor_sync(kFull, rs, x);
  l = l * corr + rs;
  m = mn;
  return corr;
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
  const int32_t b0 = b * KV_BLOCK_TOKENS, kb = b0 + 2 * (threadIdx.x & 3);
  log2_scores(sc, a);
  mask_hidden_keys(sc, b0, kN * KV_BLOCK_TOKENS, lo, pos,
                   [&](int j) { return kb + KV_BLOCK_TOKENS * (j >> 2) + (j & 1) + 8 * ((j >> 1) & 1); });
  return online_softmax<4 * kN, 3>(sc, m, l, p);  // a row's scores: the four lanes of a quad
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

// A row's online-softmax state before its first block (o: either layout's accumulators).
template <int kNT>
__device__ __forceinline__ void reset_row_state(float (&o)[kNT][4], float& m, float& l) {
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) o[nt][c] = 0.f;
  m = -INFINITY;
  l = 0.f;
}

// ---- the decode path's block math: keys in the mma's rows, the M-tile's query rows as columns ----
// run_rows (the decode-sized sequences, and the per-warp prefill path) computes S^T = K · Q^T and
// O^T += V^T · P^T: the A operand is a block's 16 keys (or 16 value channels), the B operand's 8
// columns are the M-tile's 4 query rows in two bf16 parts (column n = 2 row + part: hi, then the
// bf16 rounding of the rest). Against the query rows in the A operand's 16 rows (three parts, 12
// of them used, the layout above), every column is used: a block takes half the mma and
// ldmatrix, a lane's scores are two (keys g and g + 8 of row t = lane % 4, the parts in
// neighbouring accumulators: no shuffle to sum them), and O^T takes kD / 4 floats a lane instead of
// kD / 2. The parts never share an accumulator, so a small part is never truncated against a large
// sum (the tensor cores truncate each addition); the two are added once, in fp32, at the end.
// Two parts carry 16 of a float's 24 significant bits: about 3e-6 from the CPU's attention (as the
// wide prefill's two parts; the tests' bound is 1e-5). P^T's B fragments are the score
// accumulators' bf16 pairs transposed by movmatrix.
// Fragment map (g = lane / 4, t = lane % 4): scores s[chain][c]: (key g + 8 (c >> 1), row t, part
// c & 1); O^T o[mt][c]: (channel 16 mt + g + 8 (c >> 1), row t, part c & 1).

// This lane's B fragments of Q^T: channels 16 kk + 2t, +1 (qb[kk][0]) and +8, +9 (qb[kk][1]) of
// part g % 2 of query row g / 2 (qv: its vector; zeros past dk or when !valid).
template <int kD>
__device__ __forceinline__ void query_columns(const float* qv, bool valid, int32_t dk, uint32_t (&qb)[kD / 16][2]) {
  const int lane = threadIdx.x & 31, tig = lane & 3;
  const bool lo_part = ((lane >> 2) & 1) != 0;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk)
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int ch = 16 * kk + 2 * tig + 8 * u;
      const float x0 = valid && ch < dk ? qv[ch] : 0.f, x1 = valid && ch + 1 < dk ? qv[ch + 1] : 0.f;
      const uint32_t hi = pack_bf16x2(x0, x1);
      qb[kk][u] = lo_part ? bf16_rest(x0, x1, hi) : hi;
    }
}

// q·k of one block of 16 keys (kt: its BF16 rows) for the M-tile's columns, in two chains (even
// and odd k-steps) for latency: s[chain][c] in the fragment map above.
template <int kD>
__device__ __forceinline__ void key_row_scores(const uint16_t* kt, const uint32_t (&qb)[kD / 16][2], float (&s)[2][4]) {
  constexpr int kRow = TileGeom<kD>::kRow;
  const int lane = threadIdx.x & 31, mi = lane >> 3, ri = lane & 7;
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int x = 0; x < 4; ++x) s[c][x] = 0.f;
  // ldmatrix's four 8x8 matrices as the A fragments: keys 0-7 / 8-15 (mi & 1), channels 0-7 / 8-15
  // (mi >> 1) of the k-step.
  const uint16_t* kp = kt + (8 * (mi & 1) + ri) * kRow + 8 * (mi >> 1);
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t a[4];
    ldmatrix_x4(a, kp + 16 * kk);
    mma_bf16(s[kk & 1], a, qb[kk][0], qb[kk][1]);
  }
}

// A block's two scores on this lane (keys g and g + 8 of row t) from key_row_scores' chains and parts.
__device__ __forceinline__ void key_row_score_sums(const float (&s)[2][4], float (&sc)[2]) {
#pragma unroll
  for (int j = 0; j < 2; ++j) sc[j] = (s[0][2 * j] + s[1][2 * j]) + (s[0][2 * j + 1] + s[1][2 * j + 1]);
}

// The online softmax of one block of 16 keys (b) from this lane's scores sc (keys g, g + 8 of its
// row, which sees keys lo .. pos): the weights p, the row's new m and l, and the factor its
// accumulators must be scaled by.
__device__ __forceinline__ float key_row_softmax(float (&sc)[2], int32_t b, int32_t pos, int32_t lo, float& m,
                                                 float& l, const AttentionArgs& a, float (&p)[2]) {
  const int g = (threadIdx.x & 31) >> 2;
  const int32_t b0 = b * KV_BLOCK_TOKENS;
  log2_scores(sc, a);
  mask_hidden_keys(sc, b0, KV_BLOCK_TOKENS, lo, pos, [&](int j) { return b0 + g + 8 * j; });
  return online_softmax<2, 28>(sc, m, l, p);  // a row's 16 keys: the lanes of its t
}

// Accumulators times the softmax's correction (the caller skips it when every lane's is 1: x * 1
// == x).
template <int kN>
__device__ __forceinline__ void scale_accumulators(float (&o)[kN][4], float corr) {
#pragma unroll
  for (int n = 0; n < kN; ++n)
#pragma unroll
    for (int c = 0; c < 4; ++c) o[n][c] *= corr;
}

// x as a bf16 pair: its rounding (low half) and what the rounding left (high half). Two parts
// carry 16 significant bits.
__device__ __forceinline__ uint32_t bf16_hi_rest(float x) {
  const uint32_t hi = pack_bf16x2(x, 0.f);
  return pack_bf16x2(x, x - bf16_lo(hi));
}

// P^T's B fragments of a block (keys 0-7 and 8-15): this lane's weights of (key g + 8 j, row t) as
// (hi, rest) bf16 pairs in accumulator layout, each 8x8 transposed.
__device__ __forceinline__ void key_row_weight_columns(const float (&p)[2], uint32_t (&pb)[2]) {
#pragma unroll
  for (int j = 0; j < 2; ++j) pb[j] = movmatrix_trans(bf16_hi_rest(p[j]));
}

// O^T += V^T · P^T for a block's BF16 value tile vt; V^T's A fragments by ldmatrix.trans:
// channels 0-7 / 8-15 (mi & 1), keys 0-7 / 8-15 (mi >> 1).
template <int kD>
__device__ __forceinline__ void key_row_values(const uint16_t* vt, const uint32_t (&pb)[2], float (&o)[kD / 16][4]) {
  constexpr int kRow = TileGeom<kD>::kRow;
  const int lane = threadIdx.x & 31, mi = lane >> 3, ri = lane & 7;
  const uint16_t* vp = vt + (8 * (mi >> 1) + ri) * kRow + 8 * (mi & 1);
#pragma unroll
  for (int mt = 0; mt < kD / 16; ++mt) {
    uint32_t r[4];
    ldmatrix_x4_trans(r, vp + 16 * mt);
    mma_bf16(o[mt], r, pb[0], pb[1]);
  }
}

// Online softmax and weighted values of one block of 16 keys (b), given its q·k accumulators s:
// this lane's row (the M-tile's row lane % 4) sees keys lo .. pos; its O^T accumulators o.
template <int kD>
__device__ __forceinline__ void key_row_rest(const float (&s)[2][4], const uint16_t* vt, int32_t b, int32_t pos,
                                             int32_t lo, float (&o)[kD / 16][4], float& m, float& l,
                                             const AttentionArgs& a) {
  float sc[2], p[2];
  key_row_score_sums(s, sc);
  const float corr = key_row_softmax(sc, b, pos, lo, m, l, a, p);
  if (__any_sync(kFull, corr != 1.f)) scale_accumulators(o, corr);
  uint32_t pb[2];
  key_row_weight_columns(p, pb);
  key_row_values<kD>(vt, pb, o);
}

// Scores, online softmax and weighted values of one block of 16 keys.
template <int kD>
__device__ __forceinline__ void key_row_math(const uint16_t* kt, const uint16_t* vt, int32_t b, int32_t pos,
                                             int32_t lo, const uint32_t (&qb)[kD / 16][2], float (&o)[kD / 16][4],
                                             float& m, float& l, const AttentionArgs& a) {
  float s[2][4];
  key_row_scores<kD>(kt, qb, s);
  key_row_rest<kD>(s, vt, b, pos, lo, o, m, l, a);
}

// This lane's output values: row lane % 4, channels 16 mt + g (oc[mt][0]) and + 8 (oc[mt][1]), the
// parts summed (small first).
template <int kD>
__device__ __forceinline__ void key_row_sums(const float (&o)[kD / 16][4], float (&oc)[kD / 16][2]) {
#pragma unroll
  for (int mt = 0; mt < kD / 16; ++mt) {
    oc[mt][0] = o[mt][1] + o[mt][0];
    oc[mt][1] = o[mt][3] + o[mt][2];
  }
}

// A prefill-sized sequence's rows r0 .. r0+3 from key_row_sums' oc: this lane's row r0 + lane % 4,
// divided by its l, channels 16 mt + g and + 8 (below dv).
template <int kD>
__device__ __forceinline__ void write_key_row_output(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t r0,
                                                     int32_t n_rows, float l, const float (&oc)[kD / 16][2]) {
  const int lane = threadIdx.x & 31;
  const int32_t R = r0 + (lane & 3), dv = P.kv.head_dim_v;
  if (R >= n_rows) return;
  float* op = out_row(P, s, kvh, R);
  const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
  for (int mt = 0; mt < kD / 16; ++mt) {
    const int ch = 16 * mt + (lane >> 2);
    if (ch < dv) op[ch] = oc[mt][0] * inv;
    if (ch + 8 < dv) op[ch + 8] = oc[mt][1] * inv;
  }
}

}  // namespace gaacrt::cuda::attn
