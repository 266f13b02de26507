// attention_e8_mma.cuh — decode steps over an E8 k2v2 cache on the tensor cores: the tensor-core
// attention of attention_mma.cuh (same work split, online softmax, warp merge and fused split
// reduce) with an E8 tile loader. CPU reference: backends/cpu/attention.cpp with
// backends/cpu/kv_finalize_lossy.cpp's decode_lossy_tile; layouts: codec/e8/e8_layout.h (keys),
// codec/scalar/asym2.h (values).
//
// Why tensor cores: the CUDA-core kernel (attention_lossy.cuh) spends about 40 instructions per
// key-and-value element on decoding and on the R fp32 products per element, and was bound by
// instruction issue (0.45x the BF16 cache's speed at 64K). Here the warp decodes a block into
// exact BF16 tiles and lets mma.sync do every product:
//   * keys: a code's 8 lattice values g = (n - 8)/2 ± 1/4 are multiples of 1/4 below 4.5 in
//     magnitude, exact in bf16. From the 1 KiB packed table (shared memory) and the sign word, a
//     pair of dimensions costs a shift, a lop3 (the two nibbles into the top mantissa bits of 1.0:
//     f = 1 + n/16) and one bf16x2 fma (g = 8 f - 12 ± 1/4, exact). The tile holds g, so q·g runs
//     against the ROTATED query q~ (the prep kernel's output, three bf16 parts as usual) and the
//     token's scale n_t / alpha (and global centering's q~·mean~) is applied to the scores.
//   * values: v = z + D q (fp16 z, D per token and group of 32 channels; 2-bit q) is not exact in
//     bf16, so p·v is split: Σ_t p_t v_t = Σ_t (4 p_t D_t) c_t + Σ_t p_t (z_t - 4 D_t), with the
//     code as c = 1 + q/4 (exact in bf16: the 2 bits dropped into the mantissa, one shift and
//     one lop3 per pair, which is why a tile column pair holds channels c and c + 8: see
//     decode_v2_slot). The first sum is mma.sync with the weights 4 p D of each group as the A
//     operand (three bf16 parts: exact to fp32); the second is a few fp32 products per lane.
// Raw BF16 pages of the window (the newest blocks) are copied (values in the same column order)
// and scored against the unrotated query. Results equal the CPU's to float rounding
// (tests/test_cuda_lossy.py).
// Decode-sized sequences (<= 16 rows) only, head dims 32, 64 and 128 (one tile per block); the
// rest of an E8 cache's work is attention_lossy.cu's.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "codec/e8/e8_layout.h"
#include "codec/scalar/asym2.h"
#include "kv/lossy_codecs.h"
#include "attention_mma.cuh"
#include "e8_table.cuh"

namespace gaacrt::cuda::attn {

constexpr int kE8Stages = 4;  // blocks in each warp's pipeline (a block's slots are 1.3 KiB at d = 128)

template <int kD>
struct E8Geom {
  static constexpr uint32_t kSlotK = 4 * kD + 4 * KV_BLOCK_TOKENS;  // e8_k_slot_bytes(kD)
  static constexpr uint32_t kSlotV = 6 * kD;                        // v2_slot_bytes(kD)
  static constexpr uint32_t kStage = kSlotK + kSlotV;
  static constexpr uint32_t kRing = (kE8Stages * 2 * 4 + 15) & ~15u;  // the in-flight blocks' entries
  static constexpr uint32_t kParams = KV_BLOCK_TOKENS * (kD / ASYM2_VGROUP) * 8;  // float2 (4D, z - 4D)
  // The decoded K and V tiles and value parameters of one block; a warp has two (block i's math
  // runs while block i + 1 is decoded into the other).
  static constexpr uint32_t kDecoded = 2 * TileGeom<kD>::kTileBytes + kParams;
  // Per warp: the stages, two decoded blocks, the ring.
  static constexpr uint32_t kWarpBytes = kE8Stages * kStage + 2 * kDecoded + kRing;
  static_assert(kStage % 16 == 0 && TileGeom<kD>::kTileBytes % 16 == 0, "16-byte aligned pieces");
};

// (x & mask) | bits in one lop3: mask and bits arrive in registers (set once, outside the loops),
// since a LOP3 takes one immediate and the compiler would otherwise spend two instructions.
__device__ __forceinline__ uint32_t and_or(uint32_t x, uint32_t mask, uint32_t bits) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(x), "r"(mask), "r"(bits));
  return d;
}

// A key slot's 16 x kD/8 codes as g values into BF16 rows kt (see the header). Lane l decodes code
// block l % (kD/8) of tokens l / (kD/8), + 32 / (kD/8), ...: one fixed column per lane.
template <int kD>
__device__ __forceinline__ void decode_e8_keys(const uint8_t* sk, const uint32_t* tab, uint16_t* kt, uint32_t m78,
                                               uint32_t one2) {
  constexpr int kRow = TileGeom<kD>::kRow, kBlocks = kD / 8, kQuads = kD / 32, kStep = 32 / kBlocks;
  const int lane = threadIdx.x & 31, bi = lane % kBlocks, j = bi & 3;
  const uint8_t* src = sk + 8 * ((lane / kBlocks) * kQuads + (bi >> 2));
  uint16_t* dst = kt + (lane / kBlocks) * kRow + 8 * bi;
  const __nv_bfloat162 eight = __floats2bfloat162_rn(8.f, 8.f);
  const __nv_bfloat162 c_plus = __floats2bfloat162_rn(-11.75f, -11.75f), c_minus = __floats2bfloat162_rn(-12.25f, -12.25f);
#pragma unroll
  for (int k = 0; k < KV_BLOCK_TOKENS / kStep; ++k) {
    const uint2 w = *reinterpret_cast<const uint2*>(src + k * kStep * kQuads * 8);
    const uint32_t word = tab[__byte_perm(w.x, 0u, 0x4440u + (uint32_t)j)];
    const uint32_t sp = (w.y >> j) & 0x11111111u;
    const uint32_t par = __popc(sp) & 1u;
    const uint32_t sw = e8_signed_word(word, sp ^ par);
    const __nv_bfloat162 c = par ? c_minus : c_plus;
    uint32_t out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // Dims 2i and 2i+1 are nibbles i and i+4 (bits 4i and 4i+16): to bits 3 and 19.
      const uint32_t f = and_or(i == 0 ? sw << 3 : sw >> (4 * i - 3), m78, one2);
      const __nv_bfloat162 gv = __hfma2(*reinterpret_cast<const __nv_bfloat162*>(&f), eight, c);
      out[i] = *reinterpret_cast<const uint32_t*>(&gv);
    }
    *reinterpret_cast<uint4*>(dst + k * kStep * kRow) = make_uint4(out[0], out[1], out[2], out[3]);
  }
}

// A value slot into the warp's buffers: its 2-bit codes as c = 1 + q/4 into BF16 rows vt, and
// per (token, group) the floats (4D, z - 4D) into vp. Code word w (16 codes, channels 16w ..
// 16w + 15, code k at bits 2k) gives pair k = channels (16w + k, 16w + k + 8) with one shift and
// one lop3 (bits 2k and 2k + 16 to 5 and 21): the tile's columns 16w + 2k, +1 hold those
// channels (finish_decode's kPairsV puts them back in order). Lane l takes token l / 2, words
// (l % 2) kD/32 .. + kD/32 - 1, and the parameters of groups (l % 2) kG/2 ...
template <int kD>
__device__ __forceinline__ void decode_v2_slot(const uint8_t* sv, uint16_t* vt, float2* vp, uint32_t m60,
                                               uint32_t one2) {
  constexpr int kRow = TileGeom<kD>::kRow, kWords = kD / 32, kGroups = kD / ASYM2_VGROUP;
  const int lane = threadIdx.x & 31, t = lane >> 1, h = lane & 1;
  const uint32_t* src = reinterpret_cast<const uint32_t*>(sv + lane * (kD / 8));
#pragma unroll
  for (int wi = 0; wi < kWords; ++wi) {
    const uint32_t wd = src[wi];
    uint32_t pr[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      pr[k] = and_or(k <= 2 ? wd << (5 - 2 * k) : wd >> (2 * k - 5), m60, one2);
    }
    uint4* dst = reinterpret_cast<uint4*>(vt + t * kRow + h * (kD / 2) + 16 * wi);
    dst[0] = make_uint4(pr[0], pr[1], pr[2], pr[3]);
    dst[1] = make_uint4(pr[4], pr[5], pr[6], pr[7]);
  }
#pragma unroll
  for (int a = h; a < kGroups; a += 2) {
    const uint32_t pw = *reinterpret_cast<const uint32_t*>(sv + v2_params_offset(kD, t, a));
    const float2 dz = __half22float2(*reinterpret_cast<const __half2*>(&pw));  // (D, z)
    const float d4 = 4.f * dz.x;
    vp[t * kGroups + a] = make_float2(d4, dz.y - d4);
  }
}

// A raw BF16 value page (or zeros, src == nullptr) into vt in decode_v2_slot's column order:
// columns 16w + 2k, +1 hold channels 16w + k and 16w + k + 8.
template <int kD>
__device__ __forceinline__ void copy_v_page_pairs(const uint8_t* src, uint16_t* vt) {
  constexpr int kRow = TileGeom<kD>::kRow, kPerRow = kD / 16;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int k = 0; k < KV_BLOCK_TOKENS * kPerRow / 32; ++k) {
    const int u = lane + 32 * k, t = u / kPerRow, w = u % kPerRow;
    uint4 a = make_uint4(0, 0, 0, 0), b = a;
    if (src) {
      const uint4* p = reinterpret_cast<const uint4*>(src + (t * kD + 16 * w) * 2);
      a = p[0];  // channels 16w .. 16w + 7
      b = p[1];  // channels 16w + 8 .. 16w + 15
    }
    const uint32_t aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
    uint32_t pr[8];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      pr[2 * j] = __byte_perm(aw[j], bw[j], 0x5410);      // low halves: channels 2j and 2j + 8
      pr[2 * j + 1] = __byte_perm(aw[j], bw[j], 0x7632);  // high halves: 2j + 1 and 2j + 9
    }
    uint4* dst = reinterpret_cast<uint4*>(vt + t * kRow + 16 * w);
    dst[0] = make_uint4(pr[0], pr[1], pr[2], pr[3]);
    dst[1] = make_uint4(pr[4], pr[5], pr[6], pr[7]);
  }
}

// One warp, one M-tile (rows r0 .. r0+3), blocks b_first, b_first + b_step, ... below b_end of
// an E8 cache: leaves this lane's row state (parts not yet summed) in o, m, l, as run_rows.
template <int kD>
__device__ __forceinline__ void run_rows_e8(const KernelArgs& P, const AttnSeq& s, int32_t kvh, int32_t r0,
                                            int32_t n_rows, int32_t b_first, int32_t b_end, int32_t b_step,
                                            uint8_t* wbase, const uint32_t* tab, float (&o)[kD / 8][4], float& m,
                                            float& l) {
  using Geo = E8Geom<kD>;
  constexpr int kS = kE8Stages, kRow = TileGeom<kD>::kRow, kGroups = kD / ASYM2_VGROUP;
  const KVLayerView& kv = P.kv;
  const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
  const int lane = threadIdx.x & 31, tig = lane & 3;
  const TileRow tr = tile_row(P, s, kvh, r0, n_rows);
  const int32_t len = s.pos0 + s.n_q;  // tokens in the cache

  // Slots meet the rotated q~ (and, with global centering, q~·mean~ per score), raw pages q
  // (fragments made when such a block comes: the few newest blocks; registers are the limit).
  uint32_t qr[kD / 16][4];
  const float* qrv = P.q_rot + (((int64_t)blockIdx.z * kv.n_head_kv + kvh) * kRowsPerGroup + (tr.valid ? tr.R : 0)) * kD;
  query_fragments<kD>(qrv, tr.valid, kD, qr);
  float cadd = 0.f;
  if (st.mean_rot != nullptr && tr.valid) {
    const float* mu = st.mean_rot + (int64_t)kvh * kD;
    for (int c = tig; c < kD; c += 4) cadd = __fmaf_rn(qrv[c], mu[c], cadd);
  }
  cadd += __shfl_xor_sync(kFull, cadd, 1);
  cadd += __shfl_xor_sync(kFull, cadd, 2);
  const float inv_alpha = 1.f / st.alpha;
#pragma unroll
  for (int nt = 0; nt < kD / 8; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) o[nt][c] = 0.f;
  float oz[kGroups];  // Σ p (z - 4D) per value group, this lane's row
#pragma unroll
  for (int a = 0; a < kGroups; ++a) oz[a] = 0.f;
  m = -INFINITY;
  l = 0.f;

  uint8_t* decoded = wbase + kS * Geo::kStage;                                         // [2] K, V, params
  uint32_t* ents = reinterpret_cast<uint32_t*>(decoded + 2 * Geo::kDecoded);          // [kS][2]
  auto kt_of = [&](int32_t i) { return reinterpret_cast<uint16_t*>(decoded + (i & 1) * Geo::kDecoded); };
  auto vt_of = [&](int32_t i) { return kt_of(i) + KV_BLOCK_TOKENS * kRow; };
  auto vp_of = [&](int32_t i) { return reinterpret_cast<float2*>(vt_of(i) + KV_BLOCK_TOKENS * kRow); };
  const int32_t n_iter = b_end > b_first ? (b_end - b_first + b_step - 1) / b_step : 0;

  // Issues block `it` (entries e: K, V) into stage it % kS: slots by cp.async, raw pages warmed
  // in L2 (copied when the block's turn comes).
  auto issue = [&](int32_t it, const uint32_t (&e)[2]) {
    const int slot = it % kS;
    uint8_t* stg = wbase + slot * Geo::kStage;
    if (lane == 0) {
      ents[2 * slot] = e[0];
      ents[2 * slot + 1] = e[1];
    }
#pragma unroll
    for (int is_v = 0; is_v < 2; ++is_v) {
      if (e[is_v] == KV_ENTRY_EMPTY) continue;
      const uint8_t* src = kv_entry_ptr(kv, e[is_v], is_v);
      if (!kv_entry_is_slot(e[is_v])) {
        if (lane * 128 < KV_BLOCK_TOKENS * kD * 2) prefetch_l2(src + lane * 128);
        continue;
      }
      const uint32_t n16 = (is_v ? Geo::kSlotV : Geo::kSlotK) / 16;
      uint8_t* dst = stg + (is_v ? Geo::kSlotK : 0);
      for (uint32_t c = lane; c < n16; c += 32) cp_async16(dst + 16 * c, src + 16 * c, 16);
    }
  };
  EntryStream<2> es;
  es.start(kv, s.table, kvh, b_first, b_step, n_iter);
  es.issue_first<kS>(issue);
  // Block i's stage into its decoded buffer (raw pages copied, released ones zeros: never visible).
  // The masks of the code decoders live in registers (and_or).
  uint32_t m78 = 0x00780078u, m60 = 0x00600060u, one2 = 0x3F803F80u;
  asm volatile("" : "+r"(m78), "+r"(m60), "+r"(one2));  // opaque: kept as registers, not folded back
  auto decode_keys = [&](int32_t i) {
    const uint32_t e = ents[2 * (i % kS)];
    if (kv_entry_is_slot(e))
      decode_e8_keys<kD>(wbase + (i % kS) * Geo::kStage, tab, kt_of(i), m78, one2);
    else
      copy_page_sync<kD>(e == KV_ENTRY_EMPTY ? nullptr : kv.arena + (uint64_t)e * kv.page_bytes, kD, 0, kt_of(i),
                         lane, 32);
  };
  auto decode_values = [&](int32_t i) {
    const uint32_t e = ents[2 * (i % kS) + 1];
    if (kv_entry_is_slot(e)) {
      decode_v2_slot<kD>(wbase + (i % kS) * Geo::kStage + Geo::kSlotK, vt_of(i), vp_of(i), m60, one2);
    } else {
      copy_v_page_pairs<kD>(e == KV_ENTRY_EMPTY ? nullptr : kv.arena + (uint64_t)e * kv.page_bytes, vt_of(i));
      __syncwarp();
      zero_rows_past_end<kD>(vt_of(i), len - (b_first + i * b_step) * KV_BLOCK_TOKENS, lane);
    }
  };
  if (n_iter > 0) {
    cp_async_wait<kS - 2>();  // block 0 has landed
    __syncwarp();
    decode_keys(0);
    decode_values(0);
  }
  __syncwarp();
  // Software pipeline: block it's mma and softmax interleave with block it + 1's decode (one warp
  // runs in order; the decode's integer work fills the tensor cores' and shuffles' latencies).
  for (int32_t it = 0; it < n_iter; ++it) {
    es.issue_ahead<kS>(it, issue);
    const bool next = it + 1 < n_iter;
    cp_async_wait<kS - 2>();  // blocks up to it + 1 have landed
    __syncwarp();
    const int32_t b = b_first + it * b_step;
    const uint8_t* sk = wbase + (it % kS) * Geo::kStage;
    const uint32_t ek = ents[2 * (it % kS)], ev = ents[2 * (it % kS) + 1];
    const bool k_slot = kv_entry_is_slot(ek), v_slot = kv_entry_is_slot(ev);
    const uint16_t* kt = kt_of(it);
    const uint16_t* vt = vt_of(it);
    const float2* vp = vp_of(it);

    float s4[2][2][4], sc[4], p[4];
    if (k_slot) {
      block_scores<kD>(kt, qr, s4);
    } else {
      uint32_t qa[kD / 16][4];
      query_fragments<kD>(P.q + tr.q_off, tr.valid, kD, qa);
      block_scores<kD>(kt, qa, s4);
    }
    if (next) decode_keys(it + 1);
    sum_score_parts(s4, sc);
    if (k_slot)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int key = 2 * tig + (j & 1) + 8 * (j >> 1);
        const float nrm = *reinterpret_cast<const float*>(sk + 4 * kD + 4 * key) * inv_alpha;
        sc[j] = __fmaf_rn(sc[j], nrm, cadd);
      }
    const float corr = softmax_block<kD>(sc, b, tr.pos, tr.lo, o, m, l, P.a, p);
    if (next) decode_values(it + 1);
    uint32_t pf[4];
    if (v_slot) {
#pragma unroll
      for (int a = 0; a < kGroups; ++a) {
        float w[4], zs = 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 dz = vp[(2 * tig + (j & 1) + 8 * (j >> 1)) * kGroups + a];  // (4D, z - 4D)
          w[j] = p[j] * dz.x;
          zs = __fmaf_rn(p[j], dz.y, zs);
        }
        zs += __shfl_xor_sync(kFull, zs, 1);
        zs += __shfl_xor_sync(kFull, zs, 2);
        oz[a] = __fmaf_rn(oz[a], corr, zs);
        weights_a(w, pf);
        pv_block<kD>(pf, vt, o, 2 * a, 2 * a + 2);
      }
    } else {
#pragma unroll
      for (int a = 0; a < kGroups; ++a) oz[a] *= corr;
      weights_a(p, pf);
      pv_block<kD>(pf, vt, o);
    }
    __syncwarp();  // block it's stage and buffer are read, block it + 1's decode is written
  }
  // Σ p (z - 4D) joins the hi part of the row (lanes < 16, accumulators 0 and 1: row g < 4).
  if (lane < 16)
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt) {
      o[nt][0] += oz[nt / 4];
      o[nt][1] += oz[nt / 4];
    }
}

// Grid (n_split, kv-heads, sequences); sequences of more than 16 rows are left to
// attention_lossy.cu's kernel.
template <int kD>
__global__ void __launch_bounds__(kThreads, 2) attention_e8_mma_kernel(const KernelArgs P) {
  pdl_begin();
  extern __shared__ __align__(16) uint8_t smem[];
  const KVLayerView& kv = P.kv;
  const int warp = threadIdx.x >> 5;
  const AttnSeq s = P.seqs[blockIdx.z];
  const int32_t kvh = blockIdx.y, split = blockIdx.x;
  const int32_t G = P.a.n_head / kv.n_head_kv, n_rows = s.n_q * G;
  if (n_rows <= 0 || n_rows > kRowsPerGroup) return;
  const DecodeSplit ds = decode_split(s, n_rows, G, P.a.sliding_window, P.n_split, split);
  if (split >= min(ds.n_live, P.n_split)) return;  // block-uniform, before the first barrier
  uint32_t* tab = reinterpret_cast<uint32_t*>(smem);
  for (int x = threadIdx.x; x < E8_N_PROTO; x += kThreads) tab[x] = g_e8_table[x];
  __syncthreads();

  const DecodeWarp dw = decode_warp(n_rows, ds);
  float o[kD / 8][4], oc[kD / 8][2], m, l;
  run_rows_e8<kD>(P, s, kvh, dw.r0, n_rows, dw.b_first, dw.b_end, dw.n_kg,
                  smem + E8_N_PROTO * 4 + warp * E8Geom<kD>::kWarpBytes, tab, o, m, l);
  sum_parts<kD>(o, oc);
  finish_decode<kD, true>(P, s, kvh, split, n_rows, ds, dw, m, l, oc, smem);
}

// Shared bytes of the E8 kernel for head size kD (the table and the warps' buffers, or the merges'
// scratch if larger).
inline size_t e8_smem_bytes(int kD, int32_t n_split) {
  const uint32_t warp = kD == 128 ? E8Geom<128>::kWarpBytes : (kD == 64 ? E8Geom<64>::kWarpBytes : E8Geom<32>::kWarpBytes);
  const size_t warps = (size_t)E8_N_PROTO * 4 + (size_t)kWarps * warp;
  const size_t merge_a = (size_t)kWarps * kRowsPerTile * (kD + 2) * sizeof(float);
  const size_t merge_b = ((size_t)2 * kRowsPerGroup * n_split + kRowsPerGroup) * sizeof(float);
  return std::max(warps, std::max(merge_a, merge_b));
}

}  // namespace gaacrt::cuda::attn
