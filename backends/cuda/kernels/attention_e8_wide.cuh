// attention_e8_wide.cuh — prefill-sized sequences of an E8 k2v2 cache in wide row groups: 16
// query rows per warp (rows g and g + 8 of lane l, g = l / 4), 64 per thread block, as
// attention_wide.cuh does for the BF16 and GAAC caches.
//
// The narrow path (run_rows_e8) gives a warp an M-tile of 4 rows in the key-row layout: every key
// code becomes half an A fragment, and every value code an A fragment, once per 4 rows. Here each decoded fragment serves 16 rows, a quarter of the
// decoding per row, for a few more mma (3 per key fragment, one per query part; 2 per value
// fragment). The method is attention_e8_block.cuh's; what differs:
//   * keys: the query parts in the A operand's rows, each code a B fragment; acc[p] = Σ Q_p b for
//     each part p (exact int32 sums), a row's score from its three parts by the narrow path's
//     float operations (e8_key_row_scores);
//   * values in the flash layout, o = rows x channels: A = the weights w = p D of one value group
//     (rows x tokens) in two fp16 parts (rounded, and the remainder times kLoScale), B = the
//     centered codes q - 3/2 (tokens x channels) and, against the remainder, the same times
//     1/kLoScale (exact: a power of two, and every result a normal fp16). A block's two products
//     gather in fresh accumulators, the remainder's first, then one rounded add into o: the
//     tensor cores truncate their fp32 adds (attention_wide.cuh wide_pv);
//   * the bracket Σ p (z + 3/2 D): A = p in the same two parts, B = each group's midpoints
//     (column a: rounded to fp16, column 4 + a: the remainder times kLoScale), per block in fresh
//     accumulators summed into zs, added to the group's channels once after the last block;
//   * raw BF16 pages (the window's newest blocks): q·k against the unrotated query's three bf16
//     parts made per k-step from global memory (not held for the stream: registers), p·v by
//     wide_pv, the BF16 wide path's own.
// Each warp keeps its own pipeline of slots (e8_stream): a block's slots are 1.3 KiB at d = 128.
// GAACRT_CUDA_PREFILL_WIDE=0 keeps the 16-row groups.
#pragma once
#include "attention_e8_block.cuh"
#include "attention_wide.cuh"

namespace gaacrt::cuda::attn {

// The warp's 16 rotated query rows as int8 A fragments, part by part, and each row's constants.
template <int kD>
struct E8WideQuery {
  uint32_t a[3][kD / 32][4];  // part p, k-step s: {row g bytes 0-3, row g+8 0-3, row g 4-7, row g+8 4-7}
  float sc[2][3];             // row h (g, g + 8), part p: its step times 1/4 and 1/alpha
  int32_t k[2][3];            // kMagicBits - 15 Σ (the part's integers)
  float cadd[2];              // q~·mean~ (global centering), else 0
};

template <int kD>
__device__ __forceinline__ void e8_wide_query(const float* q_rows, const TileRow (&rw)[2], const float* mu,
                                              float inv_alpha, E8WideQuery<kD>& Q) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    E8RowParts<kD> R;
    e8_row_parts<kD>(q_rows + (rw[h].valid ? rw[h].R : 0) * kD, rw[h].valid, mu, inv_alpha, R);
#pragma unroll
    for (int p = 0; p < 3; ++p) {
#pragma unroll
      for (int s = 0; s < kD / 32; ++s) {
        Q.a[p][s][h] = R.w[p][s][0];
        Q.a[p][s][2 + h] = R.w[p][s][1];
      }
      Q.sc[h][p] = R.sc[p];
      Q.k[h][p] = R.k[p];
    }
    Q.cadd[h] = R.cadd;
  }
}

// Scores of a key slot for the warp's 16 rows (sc[h]: row h's keys 2t, 2t+1, 2t+8, 2t+9).
template <int kD>
__device__ __forceinline__ void e8_wide_scores(const uint8_t* sk, const uint32_t* tab, const E8WideQuery<kD>& Q,
                                               int qd, int bq, float (&sc)[2][4]) {
  int32_t acc[3][2][4];
  e8_key_sums<kD, 3>(sk, tab, Q.a, qd, bq, acc);
  float nt[4];
  e8_key_norms<kD>(sk, nt);
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = j >> 1, e = 2 * h + (j & 1);
      float f[3];
#pragma unroll
      for (int p = 0; p < 3; ++p) f[p] = __int_as_float(2 * acc[p][n][e] + Q.k[h][p]) - kMagic;
      // e8_key_row_scores' operations.
      const float x = __fmaf_rn(Q.sc[h][0], f[0], __fmul_rn(Q.sc[h][2], f[2])) + __fmul_rn(Q.sc[h][1], f[1]);
      sc[h][j] = __fmaf_rn(x, nt[j], Q.cadd[h]);
    }
}

// w0, w1 as fp16 pairs: rounded, and what the rounding left times kLoScale (exact in fp32).
struct F16Split {
  uint32_t hi, lo;
};
__device__ __forceinline__ F16Split f16_split(float w0, float w1) {
  const __half2 h = __floats2half2_rn(w0, w1);
  const float2 f = __half22float2(h);
  const __half2 r = __floats2half2_rn((w0 - f.x) * kLoScale, (w1 - f.y) * kLoScale);
  return F16Split{*reinterpret_cast<const uint32_t*>(&h), *reinterpret_cast<const uint32_t*>(&r)};
}

// The A operand {row g keys 2t, 2t+1; row g+8 the same; row g keys 2t+8, 2t+9; row g+8 the same}
// of weights w[h] (row h's keys 2t, 2t+1, 2t+8, 2t+9) in two fp16 parts.
__device__ __forceinline__ void f16_rows_a(const float (&w)[2][4], uint32_t (&hi)[4], uint32_t (&lo)[4]) {
#pragma unroll
  for (int u = 0; u < 2; ++u)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const F16Split s = f16_split(w[h][2 * u], w[h][2 * u + 1]);
      hi[2 * u + h] = s.hi;
      lo[2 * u + h] = s.lo;
    }
}

// o += (hi + lo / kLoScale) · B for B = (b0, b1), fp16 values exact at 1/kLoScale of their size:
// the remainder's product first, in fresh accumulators, then one rounded add.
__device__ __forceinline__ void mma_f16_two_parts(float (&o)[4], const uint32_t (&hi)[4], const uint32_t (&lo)[4],
                                                  uint32_t b0, uint32_t b1) {
  const __half2 down = __floats2half2_rn(1.f / kLoScale, 1.f / kLoScale);
  const __half2 d0 = __hmul2(*reinterpret_cast<const __half2*>(&b0), down);
  const __half2 d1 = __hmul2(*reinterpret_cast<const __half2*>(&b1), down);
  float t[4] = {0.f, 0.f, 0.f, 0.f};
  mma_f16(t, lo, *reinterpret_cast<const uint32_t*>(&d0), *reinterpret_cast<const uint32_t*>(&d1));
  mma_f16(t, hi, b0, b1);
#pragma unroll
  for (int x = 0; x < 4; ++x) o[x] += t[x];
}

// p·v of a value slot for the warp's 16 rows (p[h]: row h's weights of keys 2t, 2t+1, 2t+8,
// 2t+9) into o (rows x channels) and the bracket sums zs.
template <int kD>
__device__ __forceinline__ void e8_wide_values(const uint8_t* sv, const float (&p)[2][4], const E8ValueLane& L,
                                               float (&o)[kD / 8][4], float (&zs)[4]) {
  constexpr int kG = kD / ASYM2_VGROUP, kRowBytes = kD / 4;
  const int lane = threadIdx.x & 31, g = lane >> 2, t0 = 2 * (lane & 3);
  const uint32_t* pw = reinterpret_cast<const uint32_t*>(sv + v2_params_offset(kD, 0, 0));  // [16][kG] (D, z)
  const int tok[4] = {t0, t0 + 1, t0 + 8, t0 + 9};
  {  // the bracket: B column g = group g % 4's midpoints of tokens 2t, 2t+1 | 2t+8, 2t+9
    const int a = g & 3;
    uint32_t bm[2] = {0u, 0u};
    if (a < kG) {
      float mid[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t dz = pw[tok[j] * kG + a];
        mid[j] = __fmaf_rn(1.5f, param_d(dz), param_z(dz));
      }
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const F16Split s = f16_split(mid[2 * u], mid[2 * u + 1]);
        bm[u] = g < 4 ? s.hi : s.lo;
      }
    }
    uint32_t ph[4], pl[4];
    f16_rows_a(p, ph, pl);
    float zh[4] = {0.f, 0.f, 0.f, 0.f}, zl[4] = {0.f, 0.f, 0.f, 0.f};
    mma_f16(zh, ph, bm[0], bm[1]);
    mma_f16(zl, pl, bm[0], bm[1]);
#pragma unroll
    for (int c = 0; c < 4; ++c) zs[c] += __fmaf_rn(zl[c], 1.f / kLoScale, zh[c]);
  }
#pragma unroll
  for (int a = 0; a < kG; ++a) {
    float w[2][4];
    uint2 cw[4];  // code words 2a, 2a + 1 (the group's 32 channels) of the four tokens
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float d = param_d(pw[tok[j] * kG + a]);
      w[0][j] = p[0][j] * d;
      w[1][j] = p[1][j] * d;
      cw[j] = *reinterpret_cast<const uint2*>(sv + tok[j] * kRowBytes + 8 * a);
    }
    uint32_t wh[4], wl[4];
    f16_rows_a(w, wh, wl);
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // code word 2a + h: channels 32a + 16h .. + 15, n-tiles 4a + 2h, + 1
      const uint32_t x0 = __byte_perm(h ? cw[0].y : cw[0].x, h ? cw[1].y : cw[1].x, L.vsel);
      const uint32_t x1 = __byte_perm(h ? cw[2].y : cw[2].x, h ? cw[3].y : cw[3].x, L.vsel);
      // B column g: channel 32a + 16h + g (<< sh0) and + 8 (>> sh1), tokens 2t, 2t+1 | 2t+8, 2t+9.
      mma_f16_two_parts(o[4 * a + 2 * h], wh, wl, centered_f16(e8_code_lo(x0, L)), centered_f16(e8_code_lo(x1, L)));
      mma_f16_two_parts(o[4 * a + 2 * h + 1], wh, wl, centered_f16(e8_code_hi(x0, L)),
                        centered_f16(e8_code_hi(x1, L)));
    }
  }
}

// The bracket sums added to o's channels: zs holds rows g, g + 8 (c / 2) x columns 2t + c % 2,
// column n being group n % 4's rounded part (n < 4) or remainder (n >= 4, times kLoScale).
template <int kD>
__device__ __forceinline__ void e8_wide_fold(float (&o)[kD / 8][4], const float (&zs)[4]) {
  constexpr int kG = kD / ASYM2_VGROUP;
  const int g = (threadIdx.x & 31) >> 2;
  float y[4];  // lanes t < 2: groups 2t + c % 2 of row c / 2, the parts joined
#pragma unroll
  for (int c = 0; c < 4; ++c) y[c] = __fmaf_rn(__shfl_xor_sync(kFull, zs[c], 2), 1.f / kLoScale, zs[c]);
#pragma unroll
  for (int a = 0; a < kG; ++a)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float z = __shfl_sync(kFull, y[2 * r + (a & 1)], 4 * g + (a >> 1));
#pragma unroll
      for (int nt = 4 * a; nt < 4 * a + 4; ++nt) {
        o[nt][2 * r] += z;
        o[nt][2 * r + 1] += z;
      }
    }
}

// This warp's 16 rows r0 .. r0 + 15 of a prefill-sized sequence over its blocks [b0, b1), with
// q_rows the (sequence, kv-head)'s rotated queries (when has_slots), written to the output.
template <int kD>
__device__ __forceinline__ void prefill_e8_wide(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t r0,
                                                int32_t n_rows, int32_t b0, int32_t b1, uint8_t* wbase,
                                                const uint32_t* tab, const float* q_rows, bool has_slots) {
  constexpr int kKs = kD / 32;
  const KVLayerView& kv = P.kv;
  const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
  const int lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
  const int32_t len = s.pos0 + s.n_q;  // tokens in the cache
  const TileRow rw[2] = {query_row(P, s, kvh, r0 + g, n_rows), query_row(P, s, kvh, r0 + g + 8, n_rows)};
  E8WideQuery<kD> Q = {};
  if (has_slots)
    e8_wide_query<kD>(q_rows, rw, st.mean_rot ? st.mean_rot + (int64_t)kvh * kD : nullptr, 1.f / st.alpha, Q);
  float o[kD / 8][4], zs[4] = {0.f, 0.f, 0.f, 0.f}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int nt = 0; nt < kD / 8; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) o[nt][c] = 0.f;
  const E8ValueLane VL = e8_value_lane<false>();
  const int qd = (tig * kKs) / 4, bq = (tig * kKs) % 4;
  uint16_t* raw = e8_raw_tile<kD>(wbase);
  e8_stream<kD>(kv, s, kvh, b0, b1, 1, wbase, [&](int32_t b, const uint8_t* stg, uint32_t ek, uint32_t ev) {
    float sc[2][4], p[2][4], corr[2];
    if (kv_entry_is_slot(ek)) {
      e8_wide_scores<kD>(stg, tab, Q, qd, bq, sc);
    } else {  // a raw page (or a released one: zeros, never visible) against the unrotated q
      copy_page_sync<kD>(e8_page(kv, ek), kD, 0, raw, lane, 32);
      __syncwarp();
      float s3[1][3][2][4];
      const uint16_t* const kt[1] = {raw};
      wide_scores<kD, 1>(
          kt,
          [&](int kk, uint32_t(&f)[3][4]) -> const uint32_t(&)[3][4] {
            wide_query_step<kD>(P, rw, kk, f);
            return f;
          },
          s3);
#pragma unroll
      for (int h = 0; h < 2; ++h) wide_row_scores<1>(s3, h, sc[h]);
      __syncwarp();  // the tile is read: V may take it
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) corr[h] = softmax_weights(sc[h], b, rw[h].pos, rw[h].lo, m[h], l[h], P.a, p[h]);
    wide_rescale<kD>(o, corr);
    zs[0] *= corr[0];  // x * 1 == x
    zs[1] *= corr[0];
    zs[2] *= corr[1];
    zs[3] *= corr[1];
    if (kv_entry_is_slot(ev)) {
      e8_wide_values<kD>(stg + E8Geom<kD>::kSlotK, p, VL, o, zs);
    } else {
      copy_page_sync<kD>(e8_page(kv, ev), kD, 0, raw, lane, 32);
      __syncwarp();
      zero_rows_past_end<kD>(raw, len - b * KV_BLOCK_TOKENS, lane);
      const uint16_t* const vt[1] = {raw};
      wide_pv<kD, 1>(vt, p, o);
    }
  });
  e8_wide_fold<kD>(o, zs);
  wide_write_rows<kD>(P, s, kvh, rw, o, l);
}

}  // namespace gaacrt::cuda::attn
