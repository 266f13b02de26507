// attention_lossy.cuh — the CUDA-core attention kernel of the lossy caches (E8 k2v2, q8, kivi2),
// a template over format, rows per warp, tile width and halves; attention_lossy.cu has the design
// notes and the host side, attention_lossy_{e8,q8,kivi2}.cu instantiate it one format per file
// (so the three compile in parallel).
#pragma once
#include <cmath>

#include <cuda_fp16.h>

#include "../cuda_common.h"
#include "codec/e8/e8_layout.h"
#include "codec/scalar/asym2.h"
#include "codec/scalar/q8_tile.h"
#include "common/error.h"
#include "kv/lossy_codecs.h"
#include "e8_table.cuh"
#include "entry_stream.cuh"

namespace gaacrt::cuda::lossy::detail {


constexpr int kW = 4, kThreads = kW * 32, kStages = 3, kSplitRows = 16, kMaxSplit = 256;
constexpr int kMinBlocks = 4;  // thread blocks per SM the register budget is cut for (<= 128 registers),
                               // except 4-row tiles of 96/128 channels (3: ~168 registers) and 256-dim heads (1)
constexpr unsigned kFull = 0xffffffffu;

struct Args {
  KVLayerView kv;
  AttentionArgs a;
  const AttnSeq* seqs;
  const float* q;
  const float* q_rot;  // E8: [seq][kv-head][rot_rows][dk], the queries rotated by rotate_kernel
  float* out;
  float* part;         // [seq][kv-head][n_split][16 rows][dv + 2]: O, then m, l
  int32_t n_split;
  uint32_t stage_bytes, warp_bytes;
  int32_t skip_decode;  // 1: sequences of <= 16 rows are the E8 tensor-core kernel's (attention_e8_mma.cuh)
  int32_t rot_rows;     // E8: rows per (sequence, kv-head) in q_rot (lossy_ops.h e8_rot_rows)
};

__device__ __forceinline__ float h2f(uint32_t bits16) { return __half2float(__ushort_as_half((unsigned short)bits16)); }
__device__ __forceinline__ float bf2f(uint32_t bits16) { return __uint_as_float(bits16 << 16); }

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::cp_async(smem, gmem, 16, 16);
#else
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::cp_async_wait(N);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Butterfly reduce-scatter over the lanes xor O, O/2, ..., 1 of N values: each step halves the
// values a lane keeps (the upper half where lane & O); `base` gathers the kept index offset.
template <int N, int O>
__device__ __forceinline__ void reduce_scatter(float* v, int lane, int& base) {
  if constexpr (O > 0) {
    if constexpr (N > 1) {
      const bool up = (lane & O) != 0;
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        const float send = up ? v[i] : v[i + N / 2];
        const float keep = up ? v[i + N / 2] : v[i];
        v[i] = keep + __shfl_xor_sync(kFull, send, O);
      }
      if (up) base += N / 2;
      reduce_scatter<N / 2, O / 2>(v, lane, base);
    } else {
      v[0] += __shfl_xor_sync(kFull, v[0], O);
      reduce_scatter<1, O / 2>(v, lane, base);
    }
  }
}

template <KVFormat F, int R, int T, int NH>
struct Attn {
  static constexpr int D = T * NH;                              // head dim (K and V)
  static constexpr int CPL = T / 32;                            // value channels per lane per half
  static constexpr int NB = T / 8;                              // 8-channel blocks per token per half
  static constexpr int NBP = NB <= 4 ? 4 : (NB <= 8 ? 8 : 16);  // lanes per token group
  static constexpr int TG = 32 / NBP;                           // token groups
  static constexpr int NT = KV_BLOCK_TOKENS / TG;               // tokens per lane
  static constexpr bool kE8 = F == KVFormat::E8;
  static constexpr uint32_t slot_k() {
    return F == KVFormat::E8 ? e8_k_slot_bytes(T) : (F == KVFormat::Q8 ? q8_slot_bytes(T) : kivi2_k_slot_bytes(T));
  }
  static constexpr uint32_t slot_v() { return F == KVFormat::Q8 ? q8_slot_bytes(T) : v2_slot_bytes(T); }
  static constexpr uint32_t stage_bytes() { return NH * (slot_k() + slot_v()); }
  // Per warp: q and q~ [2][R][D], scores and weights [16][R] each, the stages.
  // Per warp also the ring of the in-flight blocks' table entries ([kStages][2 NH], 16-byte rounded).
  static constexpr uint32_t ring_bytes() { return (kStages * 2 * NH * 4 + 15) & ~15u; }
  static constexpr uint32_t warp_bytes() {
    return 2 * R * D * 4 + 2 * 16 * R * 4 + kStages * stage_bytes() + ring_bytes();
  }
  static constexpr uint32_t merge_bytes() { return kW * R * (D + 2) * 4; }
  static constexpr size_t smem_bytes() { return E8_N_PROTO * 4 + kW * (size_t)warp_bytes() + merge_bytes(); }

  struct Rows {
    int32_t pos[R], lo[R];
    bool valid[R];
    int32_t qrow[R];  // index of the row's query vector in q (token * n_head + head)
    // Blocks [*b0, *b1) holding every key some valid row sees.
    __device__ void block_range(int32_t* b0, int32_t* b1) const {
      int32_t lo_k = 0x7fffffff, hi_k = -1;
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (valid[r]) {
          lo_k = min(lo_k, lo[r]);
          hi_k = max(hi_k, pos[r]);
        }
      *b0 = lo_k / KV_BLOCK_TOKENS;
      *b1 = hi_k / KV_BLOCK_TOKENS + 1;
    }
  };

  // Online softmax state of a warp's R rows; acc covers this lane's value channels.
  struct State {
    float m[R], l[R];
    float acc[R][NH * CPL];
  };

  __device__ static void issue(const Args& P, const uint32_t (&ent)[2 * NH], uint8_t* stage) {
    const KVLayerView& kv = P.kv;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int is_v = 0; is_v < 2; ++is_v)
#pragma unroll
      for (int h = 0; h < NH; ++h) {
        const uint32_t e = ent[is_v * NH + h];
        if (!kv_entry_is_slot(e)) continue;
        const uint32_t bytes = is_v ? slot_v() : slot_k();
        const uint8_t* src = kv_entry_ptr(kv, e, is_v);
        uint8_t* dst = stage + (is_v ? NH * slot_k() + h * slot_v() : h * slot_k());
        for (uint32_t o = lane * 16; o < bytes; o += 512) cp_async16(dst + o, src + o);
      }
  }

  // Scores of one block (this lane's partial sums s[nt][r], then reduced into sc[16][R]).
  __device__ static void score_block(const Args& P, const uint32_t* ents, const uint8_t* stage,
                                     const float* qs, const uint32_t* tab, const float (&qmu)[R][NH], float* sc,
                                     float (&cadd)[R]) {
    const KVLayerView& kv = P.kv;
    const int lane = threadIdx.x & 31, j = lane % NBP, tg = lane / NBP;
    float v[NT * R];
#pragma unroll
    for (int i = 0; i < NT * R; ++i) v[i] = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) cadd[r] = 0.f;
#pragma unroll
    for (int h = 0; h < NH; ++h) {
      const uint32_t e = ents[h];
      if (e == KV_ENTRY_EMPTY) continue;
      const bool slot = kv_entry_is_slot(e);
      if (kE8 && slot)
#pragma unroll
        for (int r = 0; r < R; ++r) cadd[r] += qmu[r][h];
      if (j >= NB) continue;
      // This lane's 8 query channels of every row (E8 slots: the rotated queries).
      const float* qb = qs + ((kE8 && slot) ? R * D : 0) + h * T + 8 * j;
      float qv[R][8];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float4 a = *reinterpret_cast<const float4*>(qb + r * D);
        const float4 c = *reinterpret_cast<const float4*>(qb + r * D + 4);
        qv[r][0] = a.x; qv[r][1] = a.y; qv[r][2] = a.z; qv[r][3] = a.w;
        qv[r][4] = c.x; qv[r][5] = c.y; qv[r][6] = c.z; qv[r][7] = c.w;
      }
      if (!slot) {  // raw BF16 page (global)
        const uint16_t* pg = reinterpret_cast<const uint16_t*>(kv.arena + (uint64_t)e * kv.page_bytes);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int t = tg + TG * nt;
          const uint4 x = *reinterpret_cast<const uint4*>(pg + t * T + 8 * j);
          float kf[8];
          const uint32_t w4[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            kf[2 * k] = bf2f(w4[k] & 0xffffu);
            kf[2 * k + 1] = bf2f(w4[k] >> 16);
          }
#pragma unroll
          for (int r = 0; r < R; ++r) {
            float acc = 0.f;
#pragma unroll
            for (int k = 0; k < 8; ++k) acc = __fmaf_rn(qv[r][k], kf[k], acc);
            v[nt * R + r] += acc;
          }
        }
        continue;
      }
      const uint8_t* sl = stage + h * slot_k();
      if constexpr (F == KVFormat::E8) {
        const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
        const int qd = j >> 2, bi = j & 3;
        const float inv_alpha = 1.f / st.alpha;
        float qsum[R];
#pragma unroll
        for (int r = 0; r < R; ++r)
          qsum[r] = ((qv[r][0] + qv[r][1]) + (qv[r][2] + qv[r][3])) + ((qv[r][4] + qv[r][5]) + (qv[r][6] + qv[r][7]));
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int t = tg + TG * nt;
          const uint2 w = *reinterpret_cast<const uint2*>(sl + e8_k_quad_offset(T, t, qd));
          const uint32_t word = tab[(w.x >> (8 * bi)) & 0xffu];
          const uint32_t sp = (w.y >> bi) & 0x11111111u;
          const uint32_t par = __popc(sp) & 1u;
          const uint32_t sw = e8_signed_word(word, sp ^ par);
          // g_k = (n_k - 8) / 2 + sh with n_k the dimension's nibble; f_k = 1 + n_k / 16 is the
          // nibble dropped into a float's top mantissa bits (exact), so g_k = 8 f_k - 12 + sh and
          // <q, g> = 8 <q, f> + (sh - 12) sum(q): two integer ops per dimension, no conversion.
          const float shc = par ? -12.25f : -11.75f;
          float f[8];
#pragma unroll
          for (int k = 0; k < 8; ++k) {
            const int sft = 4 * e8_dim_nibble(k);
            const uint32_t nb = sft <= 19 ? (sw << (19 - sft)) : (sw >> (sft - 19));
            f[k] = __uint_as_float((nb & 0x00780000u) | 0x3F800000u);
          }
          const float nrm = *reinterpret_cast<const float*>(sl + e8_k_norm_offset(T, t)) * inv_alpha;
#pragma unroll
          for (int r = 0; r < R; ++r) {
            float acc = 0.f;
#pragma unroll
            for (int k = 0; k < 8; ++k) acc = __fmaf_rn(qv[r][k], f[k], acc);
            acc = __fmaf_rn(shc, qsum[r], 8.f * acc);
            v[nt * R + r] = __fmaf_rn(acc, nrm, v[nt * R + r]);
          }
        }
      } else if constexpr (F == KVFormat::Q8) {
        const int grp = j >> 2, off = 8 * (j & 3);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int t = tg + TG * nt;
          const uint8_t* blk = sl + q8_block_offset(T, t, grp);
          const float dq = h2f(*reinterpret_cast<const uint16_t*>(blk));
          const uint16_t* p16 = reinterpret_cast<const uint16_t*>(blk + 2 + off);
          float kf[8];
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const uint32_t u = p16[k];
            kf[2 * k] = (float)(int8_t)(u & 0xffu);
            kf[2 * k + 1] = (float)(int8_t)(u >> 8);
          }
#pragma unroll
          for (int r = 0; r < R; ++r) {
            float acc = 0.f;
#pragma unroll
            for (int k = 0; k < 8; ++k) acc = __fmaf_rn(qv[r][k], kf[k], acc);
            v[nt * R + r] = __fmaf_rn(acc, dq, v[nt * R + r]);
          }
        }
      } else {  // KIVI2 keys: per channel (D, z) over the block; k = z + D * code
        uint32_t wc[8];
        float qz[R], qd[R][8];
#pragma unroll
        for (int r = 0; r < R; ++r) qz[r] = 0.f;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const int c = 8 * j + k;
          wc[k] = *reinterpret_cast<const uint32_t*>(sl + 4 * c);
          const uint32_t pw = *reinterpret_cast<const uint32_t*>(sl + kivi2_k_params_offset(T, c));
          const float Dk = h2f(pw & 0xffffu), zk = h2f(pw >> 16);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            qz[r] = __fmaf_rn(qv[r][k], zk, qz[r]);
            qd[r][k] = qv[r][k] * Dk;
          }
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int t = tg + TG * nt;
          float cf[8];
#pragma unroll
          for (int k = 0; k < 8; ++k) cf[k] = (float)((wc[k] >> (2 * t)) & 3u);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            float acc = qz[r];
#pragma unroll
            for (int k = 0; k < 8; ++k) acc = __fmaf_rn(qd[r][k], cf[k], acc);
            v[nt * R + r] += acc;
          }
        }
      }
    }
    int base = 0;
    reduce_scatter<NT * R, NBP / 2>(v, lane, base);
    constexpr int NF = (NT * R) / NBP > 0 ? (NT * R) / NBP : 1;
#pragma unroll
    for (int i = 0; i < NF; ++i) {
      const int idx = base + i, nt = idx / R, r = idx % R;
      sc[(tg + TG * nt) * R + r] = v[i];
    }
  }

  // Values of one block into the lane's channels: acc[r][h*CPL + c] += w[t][r] * v[t][ch].
  __device__ static void value_block(const Args& P, const uint32_t* ents, const uint8_t* stage,
                                     const float* wt, State& S) {
    const KVLayerView& kv = P.kv;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int h = 0; h < NH; ++h) {
      const uint32_t e = ents[NH + h];
      if (e == KV_ENTRY_EMPTY) continue;
      const bool slot = kv_entry_is_slot(e);
      const uint8_t* sl = stage + NH * slot_k() + h * slot_v();
      const uint16_t* pg = reinterpret_cast<const uint16_t*>(kv.arena + (uint64_t)(slot ? 0 : e) * kv.page_bytes);
#pragma unroll 4
      for (int t = 0; t < KV_BLOCK_TOKENS; ++t) {
        float w[R];
        bool any = false;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          w[r] = wt[t * R + r];
          any |= w[r] != 0.f;
        }
        // A raw page's rows past the newest token are not written yet (any bits, NaN included):
        // skip tokens no row sees. Slots hold 16 real tokens (0 * v = 0), so no test there.
        if (!slot && !any) continue;
        float val[CPL];
        if (!slot) {
#pragma unroll
          for (int c = 0; c < CPL; ++c) val[c] = bf2f(pg[t * T + lane * CPL + c]);
        } else if constexpr (F == KVFormat::Q8) {
#pragma unroll
          for (int c = 0; c < CPL; ++c) {
            const int ch = lane * CPL + c;
            const uint8_t* blk = sl + q8_block_offset(T, t, ch / Q8_GROUP);
            val[c] = h2f(*reinterpret_cast<const uint16_t*>(blk)) * (float)(int8_t)blk[2 + ch % Q8_GROUP];
          }
        } else {
#pragma unroll
          for (int c = 0; c < CPL; ++c) {
            const int ch = lane * CPL + c;
            const uint32_t byte = sl[v2_codes_offset(T, t) + (ch >> 2)];
            const uint32_t pw = *reinterpret_cast<const uint32_t*>(sl + v2_params_offset(T, t, ch / ASYM2_VGROUP));
            // code q as cf = 1 + q / 4 (bits dropped into the mantissa): z + D q = (z - 4D) + 4D cf.
            const float d4 = 4.f * h2f(pw & 0xffffu), zz = h2f(pw >> 16) - d4;
            const float cf = __uint_as_float((((byte << 21) >> (2 * (ch & 3))) & 0x00600000u) | 0x3F800000u);
            val[c] = __fmaf_rn(d4, cf, zz);
          }
        }
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int c = 0; c < CPL; ++c) S.acc[r][h * CPL + c] = __fmaf_rn(w[r], val[c], S.acc[r][h * CPL + c]);
      }
    }
  }

  // Blocks b = first, first + step, ... < end for the warp's rows.
  __device__ static void run(const Args& P, const AttnSeq& s, int32_t kvh, const Rows& rows, int32_t first,
                             int32_t end, int32_t step, uint8_t* wbuf, const uint32_t* tab, const float (&qmu)[R][NH],
                             State& S) {
    const int lane = threadIdx.x & 31;
    float* qs = reinterpret_cast<float*>(wbuf);
    float* sc = qs + 2 * R * D;
    float* wt = sc + 16 * R;
    uint8_t* stages = reinterpret_cast<uint8_t*>(wt + 16 * R);
    uint32_t* ents = reinterpret_cast<uint32_t*>(stages + kStages * stage_bytes());
#pragma unroll
    for (int r = 0; r < R; ++r) {
      S.m[r] = -INFINITY;
      S.l[r] = 0.f;
#pragma unroll
      for (int c = 0; c < NH * CPL; ++c) S.acc[r][c] = 0.f;
    }
    const int32_t n = first < end ? (end - first + step - 1) / step : 0;
    // Issues block i of this warp into stage i % kStages, keeping its entries for the decode.
    auto issue_at = [&](int32_t i, const uint32_t (&e)[2 * NH]) {
      const int slot = i % kStages;
      if (lane == 0)
#pragma unroll
        for (int t = 0; t < 2 * NH; ++t) ents[slot * 2 * NH + t] = e[t];
      issue(P, e, stages + slot * stage_bytes());
    };
    EntryStream<2 * NH> es;  // the table entries of this warp's blocks (entry_stream.cuh)
    es.start(P.kv, s.table, kvh, first, step, n);
    es.template issue_first<kStages>(issue_at);
    const float scale = P.a.scale, cap = P.a.softcap;
    for (int32_t it = 0; it < n; ++it) {
      es.template issue_ahead<kStages>(it, issue_at);
      cp_async_wait<kStages - 1>();
      __syncwarp();
      const int32_t b = first + it * step;
      const uint8_t* stage = stages + (it % kStages) * stage_bytes();
      float cadd[R];
      const uint32_t* be = ents + (it % kStages) * 2 * NH;
      score_block(P, be, stage, qs, tab, qmu, sc, cadd);
      __syncwarp();
      // Online softmax: lanes t and t + 16 both hold token t (mirrors).
      const int t = lane & 15, jpos = b * KV_BLOCK_TOKENS + t;
      float wv[R], corr[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const bool vis = rows.valid[r] && jpos >= rows.lo[r] && jpos <= rows.pos[r];
        float x = -INFINITY;
        if (vis) {
          x = (sc[t * R + r] + cadd[r]) * scale;
          if (cap > 0.f) x = cap * tanhf(x / cap);
        }
        float mx = x;
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, o));
        const float mn = fmaxf(S.m[r], mx);
        float w = 0.f, cr = 1.f;
        if (mn != -INFINITY) {
          w = vis ? expf(x - mn) : 0.f;
          cr = expf(S.m[r] - mn);
        }
        float sw = w;
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) sw += __shfl_xor_sync(kFull, sw, o);
        S.l[r] = S.l[r] * cr + sw;
        S.m[r] = mn;
        wv[r] = w;
        corr[r] = cr;
      }
      if (lane < 16)
#pragma unroll
        for (int r = 0; r < R; ++r) wt[t * R + r] = wv[r];
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (corr[r] != 1.f)
#pragma unroll
          for (int c = 0; c < NH * CPL; ++c) S.acc[r][c] *= corr[r];
      __syncwarp();
      value_block(P, be, stage, wt, S);
      __syncwarp();
    }
    cp_async_wait<0>();
    __syncwarp();
  }

  // Loads the rows' queries into the warp's buffer (and q~ for E8: from the prep kernel's
  // output, or rotated here), and q~ . mean~ per half.
  __device__ static void load_queries(const Args& P, const AttnSeq& s, int32_t seq, int32_t kvh, int32_t r0,
                                      int32_t n_rows, bool prerotated, Rows& rows, uint8_t* wbuf,
                                      float (&qmu)[R][NH]) {
    const KVLayerView& kv = P.kv;
    const int lane = threadIdx.x & 31;
    const int32_t G = P.a.n_head / kv.n_head_kv, sw = P.a.sliding_window;
    float* qs = reinterpret_cast<float*>(wbuf);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int32_t row = r0 + r;
      rows.valid[r] = row < n_rows;
      const int32_t i = rows.valid[r] ? row / G : 0, g = rows.valid[r] ? row % G : 0;
      rows.pos[r] = s.pos0 + i;
      rows.lo[r] = sw > 0 ? max(0, rows.pos[r] - sw + 1) : 0;
      rows.qrow[r] = (s.q_begin + i) * P.a.n_head + kvh * G + g;
    }
    __syncwarp();
#pragma unroll
    for (int r = 0; r < R; ++r)
      for (int c = lane; c < D; c += 32) qs[r * D + c] = rows.valid[r] ? P.q[(size_t)rows.qrow[r] * D + c] : 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int h = 0; h < NH; ++h) qmu[r][h] = 0.f;
    if constexpr (kE8) {
      const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
      if (prerotated) {
#pragma unroll
        for (int r = 0; r < R; ++r)
          for (int c = lane; c < D; c += 32)
            qs[R * D + r * D + c] =
                rows.valid[r] ? P.q_rot[(((size_t)seq * kv.n_head_kv + kvh) * P.rot_rows + r0 + r) * D + c] : 0.f;
      } else {
        __syncwarp();
        const float* scl = st.scale ? st.scale + (size_t)kvh * D : nullptr;  // centering: q~ = R (scale * q)
        for (int i = lane; i < D; i += 32) {
          const float* Ri = st.rot + (size_t)i * D;
          float y[R];
#pragma unroll
          for (int r = 0; r < R; ++r) y[r] = 0.f;
          for (int c = 0; c < D; ++c) {
            const float rc = scl ? __fmul_rn(Ri[c], scl[c]) : Ri[c];
#pragma unroll
            for (int r = 0; r < R; ++r) y[r] = __fmaf_rn(rc, qs[r * D + c], y[r]);
          }
#pragma unroll
          for (int r = 0; r < R; ++r) qs[R * D + r * D + i] = y[r];
        }
      }
      __syncwarp();
      if (st.mean_rot) {
        const float* mu = st.mean_rot + (size_t)kvh * D;
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int h = 0; h < NH; ++h) {
            float a = 0.f;
            for (int c = lane; c < T; c += 32) a = __fmaf_rn(qs[R * D + r * D + h * T + c], mu[h * T + c], a);
            qmu[r][h] = warp_sum_f32(a);
          }
      }
    }
    __syncwarp();
  }

  __device__ static void kernel(const Args& P) {
    GAACRT_DYNAMIC_SMEM(smem);
    uint32_t* tab = reinterpret_cast<uint32_t*>(smem);
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    if constexpr (kE8)
      for (int i = tid; i < E8_N_PROTO; i += kThreads) tab[i] = g_e8_table[i];
    __syncthreads();
    const KVLayerView& kv = P.kv;
    const int32_t sp = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z;
    const AttnSeq s = P.seqs[seq];
    const int32_t G = P.a.n_head / kv.n_head_kv, n_rows = s.n_q * G;
    uint8_t* wbuf = smem + E8_N_PROTO * 4 + (size_t)w * P.warp_bytes;
    float* merge = reinterpret_cast<float*>(smem + E8_N_PROTO * 4 + (size_t)kW * P.warp_bytes);
    Rows rows;
    float qmu[R][NH];
    State S;
    if (n_rows > kSplitRows) {
      // Prefill-sized: one R-row tile per warp over its whole visible range.
      const int32_t n_tiles = (n_rows + R - 1) / R;
      for (int32_t rt = sp * kW + w; rt < n_tiles; rt += gridDim.x * kW) {
        load_queries(P, s, seq, kvh, rt * R, n_rows, false, rows, wbuf, qmu);
        int32_t b0, b1;
        rows.block_range(&b0, &b1);
        run(P, s, kvh, rows, b0, b1, 1, wbuf, tab, qmu, S);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (!rows.valid[r]) continue;
          const float inv = S.l[r] > 0.f ? 1.f / S.l[r] : 0.f;
          float* o = P.out + (size_t)rows.qrow[r] * D;
#pragma unroll
          for (int h = 0; h < NH; ++h)
#pragma unroll
            for (int c = 0; c < CPL; ++c) o[h * T + lane * CPL + c] = S.acc[r][h * CPL + c] * inv;
        }
      }
      return;
    }
    // Decode-sized: split the visible blocks over the thread blocks, deal them to the warps
    // (blocks past n_split, there for prefill-sized sequences of the batch, have no share).
    if (sp >= P.n_split || P.skip_decode) return;
    const int32_t rs = D + 2;
    for (int32_t r0 = 0; r0 < n_rows; r0 += R) {
      load_queries(P, s, seq, kvh, r0, n_rows, kE8, rows, wbuf, qmu);
      int32_t bl, bh;
      rows.block_range(&bl, &bh);
      const int32_t per = (bh - bl + P.n_split - 1) / P.n_split;
      const int32_t b0 = bl + sp * per, b1 = min(bh, b0 + per);
      run(P, s, kvh, rows, b0 + w, b1, kW, wbuf, tab, qmu, S);
      // Merge the warps: [warp][r][O..., m, l].
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float* mw = merge + (w * R + r) * rs;
#pragma unroll
        for (int h = 0; h < NH; ++h)
#pragma unroll
          for (int c = 0; c < CPL; ++c) mw[h * T + lane * CPL + c] = S.acc[r][h * CPL + c];
        if (lane == 0) {
          mw[D] = S.m[r];
          mw[D + 1] = S.l[r];
        }
      }
      __syncthreads();
      for (int e = tid; e < R * rs; e += kThreads) {
        const int r = e / rs, c = e % rs;
        if (r0 + r >= n_rows) continue;
        float M = -INFINITY;
        for (int k = 0; k < kW; ++k) M = fmaxf(M, merge[(k * R + r) * rs + D]);
        float val = 0.f;
        if (M != -INFINITY) {
          if (c == D) {
            val = M;
          } else {
            const int cc = c == D + 1 ? D + 1 : c;
            for (int k = 0; k < kW; ++k) {
              const float mk = merge[(k * R + r) * rs + D];
              if (mk != -INFINITY) val += merge[(k * R + r) * rs + cc] * expf(mk - M);
            }
          }
        } else {
          val = c == D ? -INFINITY : 0.f;
        }
        P.part[((((size_t)seq * kv.n_head_kv + kvh) * P.n_split + sp) * kSplitRows + r0 + r) * rs + c] = val;
      }
      __syncthreads();
    }
  }
};

template <KVFormat F, int R, int T, int NH>
__global__ void __launch_bounds__(kThreads, NH == 2 ? 1 : ((R == 4 && T >= 96) ? 3 : kMinBlocks)) attn_kernel(Args P) {
  pdl_begin();
  Attn<F, R, T, NH>::kernel(P);
}

template <KVFormat F, int R, int T, int NH>
void launch(Args P, dim3 grid, int max_smem, cudaStream_t stream) {
  using K = Attn<F, R, T, NH>;
  const size_t smem = K::smem_bytes();
  if (smem > (size_t)max_smem)
    throw Error("backend", "invalid_argument",
                strfmt("cuda attention: %zu bytes of shared memory needed for this lossy cache, the device allows %d",
                       smem, max_smem));
  static bool configured = false;  // per instantiation (the attribute is per function)
  if (!configured) {
    GAACRT_CUDA_CHECK(cudaFuncSetAttribute(attn_kernel<F, R, T, NH>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)smem));
    configured = true;
  }
  P.stage_bytes = K::stage_bytes();
  P.warp_bytes = K::warp_bytes();
  launch_kernel(attn_kernel<F, R, T, NH>, grid, kThreads, smem, stream, P);
}

template <KVFormat F, int R>
void launch_dims(const KVLayerView& kv, Args P, dim3 grid, int max_smem, cudaStream_t stream) {
  if (kv.n_half == 2) return launch<F, R, 128, 2>(P, grid, max_smem, stream);
  switch (kv.tile_dim) {
    case 32: return launch<F, R, 32, 1>(P, grid, max_smem, stream);
    case 64: return launch<F, R, 64, 1>(P, grid, max_smem, stream);
    case 96: return launch<F, R, 96, 1>(P, grid, max_smem, stream);
    default: return launch<F, R, 128, 1>(P, grid, max_smem, stream);
  }
}

template <KVFormat F>
void launch_rows(const KVLayerView& kv, int32_t G, Args P, dim3 grid, int max_smem, cudaStream_t stream) {
  if (G == 1) return launch_dims<F, 1>(kv, P, grid, max_smem, stream);
  if (G == 2) return launch_dims<F, 2>(kv, P, grid, max_smem, stream);
  return launch_dims<F, 4>(kv, P, grid, max_smem, stream);
}


// One per format file: picks R (rows per warp) from the group size and the tile shape.
void launch_e8(const KVLayerView& kv, int32_t G, const Args& P, dim3 grid, int max_smem, cudaStream_t stream);
void launch_q8(const KVLayerView& kv, int32_t G, const Args& P, dim3 grid, int max_smem, cudaStream_t stream);
void launch_kivi2(const KVLayerView& kv, int32_t G, const Args& P, dim3 grid, int max_smem, cudaStream_t stream);

}  // namespace gaacrt::cuda::lossy::detail
