// attention_e8_block.cuh — the per-block math of the E8 k2v2 tensor-core attention kernel
// (attention_e8_mma.cuh): every compressed operand turned straight into mma fragments in
// registers (no decoded tiles), and one warp's pipeline of blocks (e8_stream). CPU
// reference: backends/cpu/attention.cpp with backends/cpu/kv_finalize_lossy.cpp's
// decode_lossy_tile; layouts: codec/e8/e8_layout.h (keys), codec/scalar/asym2.h (values).
//
// Keys: q·g on the int8 tensor cores (mma m16n8k32). A code's eight lattice values are
//   4 g_i = 2 (n_i - pi) - 15,   n_i = 8 + 2 eps_i a'_i in [3, 13]
// (shared/spec/e8.md §3: n_i the sign-flipped nibble of the packed table word, pi the code's
// shift bit), so
//   q·g = (2 Σ q_i b_i - 15 Σ q_i) / 4,   b_i = n_i - pi in [2, 13].
// The bytes b come out of the table word with a few integer operations (codec/e8/e8_codebook.h,
// e8_quad_block_bytes, tested on the host for every code): XOR the spread flips times 14 (14 =
// 1110b turns an odd nibble n into 16 - n), subtract pi from every nibble, and split even and odd
// nibbles into bytes (& 0x0F0F0F0F, >> 4): dims (0, 4, 1, 5) and (2, 6, 3, 7) of the block. So
// one code is 8 bytes of one k-step's fragment (32 k of one token), and the query's fragments
// hold its dims in the same permuted order (a dot product does not care).
// The rotated query q~ (fp32) enters as three int8 parts with steps s, s/128, s/128^2 (s =
// max|q~|/127: 22 significant bits), and the mma gives their dot products exactly, in int32.
// They become floats through the 1.5 * 2^23 trick (an integer add, a float subtract: exact), then
// are scaled and summed in fp32.
//
// The decode path (run_rows_e8: decode steps, and prefill's 16-row groups) uses
// attention_block.cuh's key-row layout, as the BF16 and GAAC kernels do: S^T = K · Q^T and O^T +=
// V^T · P^T, a block's 16 keys (or 16 value channels) the A operand's rows, the M-tile's 4 query
// rows the B operand's columns (n = 2 row + part). Keys: lane (g, t) decodes the codes of tokens
// g and g + 8 for each k-step into one A fragment; the query parts 0, 1 are one mma's columns, part
// 2 another's even columns, so a lane's two scores (keys g, g + 8 of row t) come out of its own
// accumulators, no shuffle. Values: the codes as the A operand (16 channels x 16 tokens per m-tile,
// one code word), in bf16. With v = z + D q (z, D fp16 per token and group of 32) and the centered
// code c = q - 3/2:
//   Σ_t p_t v_t = Σ_t (p_t D_t) c_t + [Σ_t p_t z_t + 3/2 Σ_t p_t D_t]
// c is exact in bf16: the 2 bits dropped into the mantissa of 4.0 (per register a shift and a
// lop3, a byte_perm per two) give 4 + q, one bf16 fma subtracts 11/2. Centered, the accumulators
// stay near the size of the result (with 4 + q they ran ~200x larger on near-uniform attention, and
// the tensor cores' fp32 sums lost the CPU's 1e-4 on it). The weights w = p D of a group are the B
// operand: (token, row) weights in two bf16 parts (rounded, and what the rounding left) transposed
// by movmatrix, as P^T is for BF16 pages. The bracket is one more mma per block, whose A rows are
// each group's midpoints z + 3/2 D in two bf16 parts, against P^T; it is added to its group's
// channels once, after the last block. Raw BF16 pages of the window run attention_block.cuh's
// key-row math (the unrotated query's columns, P^T) into the same accumulators.
//
// The wide prefill (attention_e8_wide.cuh, 16 rows a warp) keeps the rows in the A operand: the
// query parts as A rows, each key code a B fragment, the values with fp16 weights whose remainders
// are stored times 2^11 (kLoScale: unscaled, most would be fp16 subnormals and lose their bits).
//
// The rotated queries (q~ = R (s ⊙ q), s the centering scale when on) come made, once per
// (sequence, kv-head), by attention_lossy.cu's rotate_kernel launched just before: when every
// thread block rotated its own, the 49 blocks of a kv-head at 64K each read all of R (64 KiB),
// and a launch took 74 µs instead of 61 (H200, bench/cuda_attention_timeline.py). Results equal
// the CPU's to about 2^-17 relative (the weights' two bf16 parts; tests/test_cuda_lossy.py holds
// them to 1e-4).
// Decode-sized sequences (<= 16 rows) and, with lossy::e8_prefill_on_mma (the default), prefill-
// sized ones, head dims 32, 64 and 128 (one tile per block); the rest of an E8 cache's work is
// attention_lossy.cu's.
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

// A warp's buffers for a pipeline of kE8Stages stages.
template <int kD>
struct E8Geom {
  static constexpr int kS = kE8Stages;
  static constexpr uint32_t kSlotK = 4 * kD + 4 * KV_BLOCK_TOKENS;  // e8_k_slot_bytes(kD)
  static constexpr uint32_t kSlotV = 6 * kD;                        // v2_slot_bytes(kD)
  static constexpr uint32_t kStage = kSlotK + kSlotV;
  // The in-flight blocks' entries.
  static constexpr uint32_t kRing = (kS * 2 * 4 + 15) & ~15u;
  // Per warp: the stages, one raw-page tile (K, then V of the same block), the ring.
  static constexpr uint32_t kWarpBytes = kS * kStage + TileGeom<kD>::kTileBytes + kRing;
  // Per thread block: the table, the warps.
  static constexpr uint32_t kWarpsOff = E8_N_PROTO * 4;
  static constexpr uint32_t kBytes = kWarpsOff + kWarps * kWarpBytes;
  static_assert(kStage % 16 == 0 && TileGeom<kD>::kTileBytes % 16 == 0, "16-byte aligned pieces");
};

constexpr float kLoScale = 2048.f;          // the remainder columns' scale (see the header)
constexpr int32_t kMagicBits = 0x4B400000;  // 1.5 * 2^23: its bits + i read as float = 1.5 * 2^23 + i
constexpr float kMagic = 12582912.f;

// (x & mask) | bits in one lop3: mask and bits arrive in registers (set once, outside the loops),
// since a LOP3 takes one immediate and the compiler would otherwise spend two instructions.
__device__ __forceinline__ uint32_t and_or(uint32_t x, uint32_t mask, uint32_t bits) {
#if defined(GAACRT_CUDA_EMULATION)
  return (x & mask) | bits;
#else
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(x), "r"(mask), "r"(bits));
  return d;
#endif
}

// One query row's three int8 parts (this lane's dims of it) and the constants that turn the
// parts' sums into its score (see the header): the four lanes of the row (lanes 4g .. 4g + 3)
// call this together.
template <int kD>
struct E8RowParts {
  uint32_t w[3][kD / 32][2];  // part p, k-step s: this lane's code's bytes 0-3 and 4-7
  float sc[3];                // step of part p, times 1/4 and 1/alpha
  int32_t k[3];               // kMagicBits - 15 Σ (part p's integers)
  float cadd;                 // q~·mean~ (global centering), else 0
};

// kSteps < kD / 32: this lane makes only the k-steps half * kSteps .. + kSteps - 1 of its codes
// (R.w[p][0 .. kSteps - 1]; the caller trades the rest with lane ^ 4, which makes the other half of
// the same row: e8_query_columns), and the row's max and sums gather over lanes 4g .. 4g + 7.
template <int kD, int kSteps = kD / 32>
__device__ __forceinline__ void e8_row_parts(const float* qv, bool valid, const float* mu, float inv_alpha,
                                             E8RowParts<kD>& R, int half = 0) {
  constexpr int kKs = kD / 32;
  static_assert(kSteps == kKs || 2 * kSteps == kKs, "all of a lane's k-steps or half of them");
  const int tig = threadIdx.x & 3;
  // This lane's codes j = tig * kKs + s (one per k-step s): dims 8j .. 8j + 7, i.e. the 8 kKs dims
  // from 8 tig kKs, which the four lanes of a row hold between them. Loaded first, 16 bytes at a
  // time (rows are kD floats, 16-byte aligned): one trip for all of them. (Loaded one float at a
  // time where the math used them, ~12% of the E8 decode's stall samples at 64K sat on them: H100,
  // Nsight Compute, twenty-first session.)
  constexpr int kN = 8 * kSteps;
  const int off = 8 * kKs * tig + 8 * kSteps * half;
  float q[kN], u[kN];
#pragma unroll
  for (int x = 0; x < kN / 4; ++x) {
    const float4 v = valid ? reinterpret_cast<const float4*>(qv + off)[x] : make_float4(0.f, 0.f, 0.f, 0.f);
    const float4 c = mu != nullptr ? reinterpret_cast<const float4*>(mu + off)[x] : make_float4(0.f, 0.f, 0.f, 0.f);
    q[4 * x] = v.x;
    q[4 * x + 1] = v.y;
    q[4 * x + 2] = v.z;
    q[4 * x + 3] = v.w;
    u[4 * x] = c.x;
    u[4 * x + 1] = c.y;
    u[4 * x + 2] = c.z;
    u[4 * x + 3] = c.w;
  }
  constexpr int kLanes = kSteps == kKs ? 2 : 4;  // the row's lanes: xor 1, 2 (and 4)
  float amax = 0.f;
#pragma unroll
  for (int x = 0; x < kN; ++x) amax = fmaxf(amax, fabsf(q[x]));
#pragma unroll
  for (int x = 1; x <= kLanes; x <<= 1) amax = fmaxf(amax, __shfl_xor_sync(kFull, amax, x));
  const float s1 = amax * (1.f / 127.f), s2 = s1 * (1.f / 128.f), s3 = s2 * (1.f / 128.f);
  const float i1 = amax > 0.f ? 127.f / amax : 0.f, i2 = i1 * 128.f, i3 = i2 * 128.f;
  int32_t sum1 = 0, sum2 = 0, sum3 = 0;
  float cadd = 0.f;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    uint32_t w1[2] = {0u, 0u}, w2[2] = {0u, 0u}, w3[2] = {0u, 0u};
#pragma unroll
    for (int b = 0; b < 8; ++b) {
      const int d = 8 * s + e8_byte_dim(b);  // the dim of the key's byte b, from off
      const float v = q[d];
      if (mu != nullptr) cadd = __fmaf_rn(v, u[d], cadd);
      // |t2|, |t3| <= 64: each residual is at most half a step of the part before.
      const float t1 = rintf(v * i1), r1 = __fmaf_rn(-s1, t1, v);
      const float t2 = rintf(r1 * i2), r2 = __fmaf_rn(-s2, t2, r1);
      const float t3 = fminf(fmaxf(rintf(r2 * i3), -127.f), 127.f);
      const int32_t q1 = (int32_t)t1, q2 = (int32_t)t2, q3 = (int32_t)t3;
      sum1 += q1;
      sum2 += q2;
      sum3 += q3;
      w1[b >> 2] |= ((uint32_t)q1 & 0xFFu) << (8 * (b & 3));
      w2[b >> 2] |= ((uint32_t)q2 & 0xFFu) << (8 * (b & 3));
      w3[b >> 2] |= ((uint32_t)q3 & 0xFFu) << (8 * (b & 3));
    }
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      R.w[0][s][x] = w1[x];
      R.w[1][s][x] = w2[x];
      R.w[2][s][x] = w3[x];
    }
  }
#pragma unroll
  for (int x = 1; x <= kLanes; x <<= 1) {
    sum1 += __shfl_xor_sync(kFull, sum1, x);
    sum2 += __shfl_xor_sync(kFull, sum2, x);
    sum3 += __shfl_xor_sync(kFull, sum3, x);
    cadd += __shfl_xor_sync(kFull, cadd, x);
  }
  R.sc[0] = s1 * 0.25f * inv_alpha;
  R.sc[1] = s2 * 0.25f * inv_alpha;
  R.sc[2] = s3 * 0.25f * inv_alpha;
  R.k[0] = kMagicBits - 15 * sum1;
  R.k[1] = kMagicBits - 15 * sum2;
  R.k[2] = kMagicBits - 15 * sum3;
  R.cadd = cadd;
}

// The int8 sums of a key slot's 16 tokens against kP query operands (a[p][s]: the A fragment of
// k-step s): acc[p][h] holds tokens 8h .. 8h + 7 as columns. Lane (g, t) decodes the codes of
// tokens g and 8 + g in its quad qd, blocks bq .. bq + kKs - 1 (all four when kD = 128); each
// decoded B fragment serves all kP operands.
template <int kD, int kP>
__device__ __forceinline__ void e8_key_sums(const uint8_t* sk, const uint32_t* tab, const uint32_t (&a)[kP][kD / 32][4],
                                            int qd, int bq, int32_t (&acc)[kP][2][4]) {
  constexpr int kKs = kD / 32;
  const int g = (threadIdx.x & 31) >> 2;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int p = 0; p < kP; ++p)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[p][h][c] = 0;
    const uint2 w = *reinterpret_cast<const uint2*>(sk + e8_k_quad_offset(kD, 8 * h + g, qd));
    const uint32_t par = e8_quad_parities(w.y), eff = w.y ^ par;
#pragma unroll
    for (int s = 0; s < kKs; ++s) {
      const int bi = kKs == 4 ? s : bq + s;
      const E8BytePair b = e8_quad_block_bytes(tab[__byte_perm(w.x, 0u, 0x4440u + (uint32_t)bi)], eff, par, bi);
#pragma unroll
      for (int p = 0; p < kP; ++p) mma_s8_k32(acc[p][h], a[p][s], b.lo, b.hi);
    }
  }
}

// The norms of this lane's keys 2t, 2t+1, 2t+8, 2t+9 (t = lane % 4) of a key slot.
template <int kD>
__device__ __forceinline__ void e8_key_norms(const uint8_t* sk, float (&nt)[4]) {
  const int tig = threadIdx.x & 3;
  const float2 n0 = *reinterpret_cast<const float2*>(sk + e8_k_norm_offset(kD, 2 * tig));
  const float2 n1 = *reinterpret_cast<const float2*>(sk + e8_k_norm_offset(kD, 8 + 2 * tig));
  nt[0] = n0.x;
  nt[1] = n0.y;
  nt[2] = n1.x;
  nt[3] = n1.y;
}

// The per-lane constants that turn value code words into an mma's A fragments of 16-bit floats
// 4 + q (e8_code_lo, e8_code_hi): one byte_perm gathers the bytes of channels g and g + 8 from two
// tokens' code words, then channel g's code is rotated and channel g + 8's shifted to the
// mantissa bits that weigh 1 at 4.0 (bits 8-9 in fp16, 5-6 in bf16), masked, and 4.0 or'ed in.
struct E8ValueLane {
  uint32_t vsel;       // byte_perm: the bytes of channels g and g + 8 of two code words
  uint32_t sh0, sh1;   // left rotation of channel g's code, right shift of channel g + 8's
  uint32_t mask, one;  // those mantissa bits and 4.0 in both halves, kept in registers for and_or
};

template <bool kBf16>
__device__ __forceinline__ E8ValueLane e8_value_lane() {
  const int g = (threadIdx.x & 31) >> 2;
  const uint32_t c = 2u * (uint32_t)(g & 3);  // channel g's code: bits c, c + 1 of its byte
  constexpr uint32_t kBit = kBf16 ? 5u : 8u;   // the mantissa bit that weighs 1 at 4.0
  E8ValueLane VL;
  VL.vsel = 0x6420u + (uint32_t)(g >> 2) * 0x1111u;
  VL.sh0 = (kBit - c) & 31u;  // (bf16, c = 6: a rotation right by one)
  VL.sh1 = 8u + c - kBit;
  VL.mask = 0x00030003u << kBit;
  VL.one = kBf16 ? 0x40804080u : 0x44004400u;
  asm volatile("" : "+r"(VL.mask), "+r"(VL.one));  // opaque: kept as registers, not folded back
  return VL;
}
// Channel g's (lo) or g + 8's (hi) codes of the two tokens byte_perm'ed into x, as 4 + q.
__device__ __forceinline__ uint32_t e8_code_lo(uint32_t x, const E8ValueLane& L) {
  return and_or(__funnelshift_l(x, x, L.sh0), L.mask, L.one);
}
__device__ __forceinline__ uint32_t e8_code_hi(uint32_t x, const E8ValueLane& L) {
  return and_or(x >> L.sh1, L.mask, L.one);
}

// A 16-bit float pair 4 + q (q = 0..3) as q - 3/2: exact.
__device__ __forceinline__ uint32_t centered_f16(uint32_t x) {
  const __half2 h = __hsub2(*reinterpret_cast<const __half2*>(&x), __floats2half2_rn(5.5f, 5.5f));
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ uint32_t centered_bf16(uint32_t x) {
#if defined(GAACRT_CUDA_EMULATION)
  return pack_bf16x2(bf16_lo(x) - 5.5f, bf16_hi(x) - 5.5f);
#else
  uint32_t d;  // x * 1 - 11/2 (an fma: bf16 subtraction is sm_90's alone)
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(x), "r"(0x3F803F80u), "r"(0xC0B0C0B0u));
  return d;
#endif
}

// ---- the decode path (run_rows_e8) in the key-row layout (see the header) ----

// The M-tile's rotated query rows as the int8 mma's B operand — lane (g, t) holds column g (row
// g / 2) at the dims of its codes: b[0] parts 0 and 1 (column 2 row + part), b[1] part 2 in the
// even columns (the odd ones zero) — and the constants of its own row t, which turn a score's
// three integer sums into its value.
template <int kD>
struct E8Columns {
  uint32_t b[2][kD / 32][2];  // [mma][k-step]: b0 (a code's bytes 0-3), b1 (bytes 4-7)
  float sc[3];                // row t, part p: the step times 1/4 and 1/alpha
  int32_t k[3];               // kMagicBits - 15 Σ (the part's integers)
  float cadd;                 // q~·mean~ (global centering), else 0
};

// Row r's lanes 8 r .. 8 r + 7 make its parts: from head size 64 each lane of a pair (lane, lane ^
// 4: columns 2 r and 2 r + 1, the same dims) makes half the k-steps (e8_row_parts' kSteps), and
// they trade what the other's columns need — the even lane parts 0 and 2 of the odd lane's half,
// the odd lane part 1 of the even lane's — in two shuffles per code word of a half. (Both
// made all of them before: the prologue's ~15 operations per dim twice over.) kPairs = false: both
// make all (the prefill kernel's 16-row groups: split, its 255 registers spilled 40 bytes more).
template <int kD, bool kPairs = true>
__device__ __forceinline__ void e8_query_columns(const float* qv, bool valid, const float* mu, float inv_alpha,
                                                 E8Columns<kD>& C) {
  constexpr int kKs = kD / 32;
  const int lane = threadIdx.x & 31;
  const bool odd = ((lane >> 2) & 1) != 0;
  E8RowParts<kD> R;
  if constexpr (kPairs && kKs >= 2) {
    constexpr int kH = kKs / 2;  // the even lane's k-steps 0 .. kH - 1, the odd lane's kH ..
    e8_row_parts<kD, kH>(qv, valid, mu, inv_alpha, R, odd ? 1 : 0);
#pragma unroll
    for (int s = 0; s < kH; ++s)
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const uint32_t r01 = __shfl_xor_sync(kFull, odd ? R.w[0][s][x] : R.w[1][s][x], 4);
        const uint32_t r2 = __shfl_xor_sync(kFull, R.w[2][s][x], 4);  // (the odd lane's unused)
        C.b[0][s][x] = odd ? r01 : R.w[0][s][x];
        C.b[0][kH + s][x] = odd ? R.w[1][s][x] : r01;
        C.b[1][s][x] = odd ? 0u : R.w[2][s][x];
        C.b[1][kH + s][x] = odd ? 0u : r2;
      }
  } else {
    e8_row_parts<kD>(qv, valid, mu, inv_alpha, R);
#pragma unroll
    for (int s = 0; s < kKs; ++s)
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        C.b[0][s][x] = odd ? R.w[1][s][x] : R.w[0][s][x];
        C.b[1][s][x] = odd ? 0u : R.w[2][s][x];
      }
  }
  const int src = 9 * (lane & 3);  // lane (2 t, t), one of row t's
#pragma unroll
  for (int p = 0; p < 3; ++p) {
    C.sc[p] = __shfl_sync(kFull, R.sc[p], src);
    C.k[p] = __shfl_sync(kFull, R.k[p], src);
  }
  C.cadd = __shfl_sync(kFull, R.cadd, src);
}

// A key slot's scores on this lane: keys g and g + 8 of row t (t = lane % 4). For k-step s the
// lane decodes code t kKs + s (quad qd, block bq + s) of tokens g and g + 8: one A fragment.
template <int kD>
__device__ __forceinline__ void e8_key_row_scores(const uint8_t* sk, const uint32_t* tab, const E8Columns<kD>& C,
                                                  int qd, int bq, float (&sc)[2]) {
  constexpr int kKs = kD / 32;
  const int g = (threadIdx.x & 31) >> 2;
  int32_t acc[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
  uint2 w[2];
  uint32_t par[2], eff[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    w[j] = *reinterpret_cast<const uint2*>(sk + e8_k_quad_offset(kD, g + 8 * j, qd));
    par[j] = e8_quad_parities(w[j].y);
    eff[j] = w[j].y ^ par[j];
  }
#pragma unroll
  for (int s = 0; s < kKs; ++s) {
    const int bi = bq + s;
    E8BytePair x[2];
#pragma unroll
    for (int j = 0; j < 2; ++j)
      x[j] = e8_quad_block_bytes(tab[__byte_perm(w[j].x, 0u, 0x4440u + (uint32_t)bi)], eff[j], par[j], bi);
    const uint32_t a[4] = {x[0].lo, x[1].lo, x[0].hi, x[1].hi};
    mma_s8_k32(acc[0], a, C.b[0][s][0], C.b[0][s][1]);
    mma_s8_k32(acc[1], a, C.b[1][s][0], C.b[1][s][1]);
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const float n = *reinterpret_cast<const float*>(sk + e8_k_norm_offset(kD, g + 8 * j));
    const float f0 = __int_as_float(2 * acc[0][2 * j] + C.k[0]) - kMagic;
    const float f1 = __int_as_float(2 * acc[0][2 * j + 1] + C.k[1]) - kMagic;
    const float f2 = __int_as_float(2 * acc[1][2 * j] + C.k[2]) - kMagic;
    const float x = __fmaf_rn(C.sc[0], f0, __fmul_rn(C.sc[2], f2)) + __fmul_rn(C.sc[1], f1);
    sc[j] = __fmaf_rn(x, n, C.cadd);
  }
}

// A token's kG words of value parameters (D, z) at once (kG = 4, 2 or 1).
template <int kG>
__device__ __forceinline__ void load_param_words(const uint32_t* p, uint32_t (&w)[kG]) {
  if constexpr (kG == 4) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    w[0] = v.x;
    w[1] = v.y;
    w[2] = v.z;
    w[3] = v.w;
  } else if constexpr (kG == 2) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    w[0] = v.x;
    w[1] = v.y;
  } else {
    w[0] = p[0];
  }
}
__device__ __forceinline__ float param_d(uint32_t dz) { return __half2float(__ushort_as_half((unsigned short)(dz & 0xFFFFu))); }
__device__ __forceinline__ float param_z(uint32_t dz) { return __half2float(__ushort_as_half((unsigned short)(dz >> 16))); }

// O^T += V^T · W^T of a value slot, W the weights w = p D of each group (this lane's p: keys g,
// g + 8 of row t) as B fragments the way P^T is made (key_row_weight_columns), and the bracket:
// oz += Z · P^T (pb), A row g of Z = group g's midpoints z + 3/2 D (exact in fp32) rounded to
// bf16, row g + 8 what the rounding left.
template <int kD>
__device__ __forceinline__ void e8_key_row_values(const uint8_t* sv, const float (&p)[2], const uint32_t (&pb)[2],
                                                  const E8ValueLane& L, float (&o)[kD / 16][4], float (&oz)[4]) {
  constexpr int kG = kD / ASYM2_VGROUP, kRowBytes = kD / 4;
  const int lane = threadIdx.x & 31, g = lane >> 2, t0 = 2 * (lane & 3);
  const uint32_t* pw = reinterpret_cast<const uint32_t*>(sv + v2_params_offset(kD, 0, 0));  // [16][kG] (D, z)
  const int tok[4] = {t0, t0 + 1, t0 + 8, t0 + 9};  // the A fragments' keys
  {
    uint32_t az[4] = {0u, 0u, 0u, 0u};
    if (g < kG) {
      float mid[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t dz = pw[tok[j] * kG + g];
        mid[j] = __fmaf_rn(1.5f, param_d(dz), param_z(dz));
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t hi = pack_bf16x2(mid[2 * h], mid[2 * h + 1]);
        az[2 * h] = hi;
        az[2 * h + 1] = bf16_rest(mid[2 * h], mid[2 * h + 1], hi);
      }
    }
    mma_bf16(oz, az, pb[0], pb[1]);
  }
  uint32_t dz[2][kG];  // (D, z) of keys g and g + 8, every group
  load_param_words<kG>(pw + g * kG, dz[0]);
  load_param_words<kG>(pw + (g + 8) * kG, dz[1]);
#pragma unroll
  for (int a = 0; a < kG; ++a) {
    uint32_t wb[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) wb[j] = movmatrix_trans(bf16_hi_rest(p[j] * param_d(dz[j][a])));
    uint2 cw[4];  // code words 2a, 2a + 1 (the group's 32 channels) of the A fragments' keys
#pragma unroll
    for (int j = 0; j < 4; ++j) cw[j] = *reinterpret_cast<const uint2*>(sv + tok[j] * kRowBytes + 8 * a);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t x0 = __byte_perm(h ? cw[0].y : cw[0].x, h ? cw[1].y : cw[1].x, L.vsel);
      const uint32_t x1 = __byte_perm(h ? cw[2].y : cw[2].x, h ? cw[3].y : cw[3].x, L.vsel);
      const uint32_t af[4] = {centered_bf16(e8_code_lo(x0, L)), centered_bf16(e8_code_hi(x0, L)),
                              centered_bf16(e8_code_lo(x1, L)), centered_bf16(e8_code_hi(x1, L))};
      mma_bf16(o[2 * a + h], af, wb[0], wb[1]);
    }
  }
}

// This lane's output values in key_row_sums' layout (row t, channels 16 mt + g and + 8) with the
// bracket of each channel's group added: lanes g < kG hold group g's four products (summed small
// first); channel 16 mt + g lies in group mt / 2.
template <int kD>
__device__ __forceinline__ void e8_key_row_sums(const float (&o)[kD / 16][4], const float (&oz)[4],
                                                float (&oc)[kD / 16][2]) {
  const int t = threadIdx.x & 3;
  key_row_sums<kD>(o, oc);
  const float zt = (oz[3] + oz[2]) + (oz[1] + oz[0]);
#pragma unroll
  for (int mt = 0; mt < kD / 16; ++mt) {
    const float z = __shfl_sync(kFull, zt, 4 * (mt / 2) + t);
    oc[mt][0] += z;
    oc[mt][1] += z;
  }
}

// A warp's raw-page tile (K, then V of the same block) behind its stages.
template <int kD>
__device__ __forceinline__ uint16_t* e8_raw_tile(uint8_t* wbase) {
  return reinterpret_cast<uint16_t*>(wbase + kE8Stages * E8Geom<kD>::kStage);
}

// A table entry's page (raw BF16, or a released one: nullptr, read as zeros).
__device__ __forceinline__ const uint8_t* e8_page(const KVLayerView& kv, uint32_t e) {
  return e == KV_ENTRY_EMPTY ? nullptr : kv.arena + (uint64_t)e * kv.page_bytes;
}

// One warp's ring of kE8Stages (kS) stages at wbase: the call ring(it, e) starts the copies of the
// warp's block `it` (entries e: K, V) into stage it % kS — slots by cp.async, the two slots' 16-byte
// chunks in one sweep (K's, then V's, contiguous in the stage), raw pages only warmed in L2 (the
// math copies them when their turn comes); the caller waits by pipeline depth (cp_async_wait).
// Not bulk copies: a block's 1.3 KiB are three cp.async a lane, while lane 0's two bulk copies and
// their barrier cost the warp more issue slots than the copies save, and the kernel is latency-
// bound. On an H100 (twenty-first session, one visit) the E8 decode attention at 32K / 64K / 128K
// took 48.4 / 67.4 / 102.0 µs a layer this way against 53.9 / 73.9 / 111.0 with bulk copies.
template <int kD>
struct E8Ring {
  using Geo = E8Geom<kD>;
  static constexpr int kS = kE8Stages;
  const KVLayerView& kv;
  uint8_t* wbase;
  uint32_t* ents;  // [kS][2]
  int lane;

  __device__ __forceinline__ E8Ring(const KVLayerView& kv_, uint8_t* wbase_)
      : kv(kv_),
        wbase(wbase_),
        ents(reinterpret_cast<uint32_t*>(wbase_ + kS * Geo::kStage + TileGeom<kD>::kTileBytes)),
        lane(threadIdx.x & 31) {}
  __device__ __forceinline__ void operator()(int32_t it, const uint32_t (&e)[2]) const {
    const int slot = it % kS;
    uint8_t* stg = wbase + slot * Geo::kStage;
    if (lane == 0) {
      ents[2 * slot] = e[0];
      ents[2 * slot + 1] = e[1];
    }
#pragma unroll
    for (int is_v = 0; is_v < 2; ++is_v) {
      if (e[is_v] == KV_ENTRY_EMPTY || kv_entry_is_slot(e[is_v])) continue;
      if (lane * 128 < KV_BLOCK_TOKENS * kD * 2) prefetch_l2(kv_entry_ptr(kv, e[is_v], is_v) + lane * 128);
    }
    const bool sk = kv_entry_is_slot(e[0]), sv = kv_entry_is_slot(e[1]);
    constexpr uint32_t kNk = Geo::kSlotK / 16, kN = Geo::kStage / 16;
    const uint8_t* ks = sk ? kv_entry_ptr(kv, e[0], 0) : nullptr;
    const uint8_t* vs = sv ? kv_entry_ptr(kv, e[1], 1) - 16 * kNk : nullptr;
#pragma unroll
    for (uint32_t c0 = 0; c0 < kN; c0 += 32) {
      const uint32_t c = c0 + lane;
      const bool is_k = c < kNk;
      if (c < kN && (is_k ? sk : sv)) cp_async16(stg + 16 * c, (is_k ? ks : vs) + 16 * c, 16);
    }
  }
  __device__ __forceinline__ const uint8_t* stage(int32_t it) const { return wbase + (it % kS) * Geo::kStage; }
  __device__ __forceinline__ uint32_t entry(int32_t it, int is_v) const { return ents[2 * (it % kS) + is_v]; }
};

// One warp's stream of blocks b_first, b_first + b_step, ... below b_end of sequence s and kv-head
// kvh through its ring of kE8Stages stages at wbase (E8Ring), kE8Stages - 1 blocks ahead. Calls
// block(b, stage, ek, ev) on each block in order, with its K and V entries and the stage holding
// its slots (K's, then V's at kSlotK); the stage may be refilled once block() returns.
template <int kD, class Block>
__device__ __forceinline__ void e8_stream(const KVLayerView& kv, const AttnSeq& s, int32_t kvh, int32_t b_first,
                                          int32_t b_end, int32_t b_step, uint8_t* wbase, Block&& block) {
  constexpr int kS = kE8Stages;
  const int32_t n_iter = b_end > b_first ? (b_end - b_first + b_step - 1) / b_step : 0;
  const E8Ring<kD> ring(kv, wbase);
  EntryStream<2> es;
  es.start(kv, s.table, kvh, b_first, b_step, n_iter);
  es.template issue_first<kS>(ring);
  for (int32_t it = 0; it < n_iter; ++it) {
    es.template issue_ahead<kS>(it, ring);
    cp_async_wait<kS - 1>();  // this lane's copies of block `it` have landed
    __syncwarp();             // ... and every lane's
    block(b_first + it * b_step, ring.stage(it), ring.entry(it, 0), ring.entry(it, 1));
    __syncwarp();  // block it's stage and the raw tile are read
  }
}

// e8_stream with one block's values and the next block's keys in one stretch of code: the decode's
// dependent chains (code words -> fragments -> mma -> scores; -> softmax -> weights -> mma) are
// long and a warp is one of three on its scheduler, so a block's work alone leaves issue slots
// idle while it waits; two independent chains side by side give the scheduler more to pick from.
// Per block, in order: keys(b, stage, ek, sc) its scores; soft(b, sc) its online softmax (after
// the previous block's values, so the accumulators are rescaled as they were one block at a time:
// the same bits); values(b, stage, ev) its weighted values. pair(b, stage, ev, bn, stage_n, ek_n,
// sc) runs values(b) and keys(bn) together (the caller's fast path when both are slots). Block
// it + 1 must have landed with block it: the ring runs one block less ahead than e8_stream's.
// Measured on an H100 against e8_stream (one visit, twenty-second session): the decode's fitted
// cost 33.0-33.1 µs per 64K tokens back to back against 33.6, a block's stream at 64K 34.3
// against 35.8 µs (median, bench/cuda_attention_timeline.py) — the compiler still issues the
// keys' mma before the values' work, so the gain is small. (Alternating their steps in the source,
// a key k-step then a value group, compiled to the same order.)
template <int kD, class Keys, class Soft, class Values, class Pair>
__device__ __forceinline__ void e8_stream_overlapped(const KVLayerView& kv, const AttnSeq& s, int32_t kvh,
                                                     int32_t b_first, int32_t b_end, int32_t b_step, uint8_t* wbase,
                                                     Keys&& keys, Soft&& soft, Values&& values, Pair&& pair) {
  constexpr int kS = kE8Stages;
  const int32_t n_iter = b_end > b_first ? (b_end - b_first + b_step - 1) / b_step : 0;
  const E8Ring<kD> ring(kv, wbase);
  EntryStream<2> es;
  es.start(kv, s.table, kvh, b_first, b_step, n_iter);
  es.template issue_first<kS>(ring);  // blocks 0 .. kS - 2
  if (n_iter == 0) return;
  cp_async_wait<kS - 2>();  // block 0 has landed
  __syncwarp();
  {
    float sc[2];
    keys(b_first, ring.stage(0), ring.entry(0, 0), sc);
    soft(b_first, sc);
  }
  for (int32_t it = 0; it + 1 < n_iter; ++it) {
    es.template issue_ahead<kS>(it, ring);  // block it + kS - 1, into block it - 1's stage
    cp_async_wait<kS - 2>();                // blocks it and it + 1 have landed
    __syncwarp();
    const int32_t b = b_first + it * b_step;
    float sc[2];
    pair(b, ring.stage(it), ring.entry(it, 1), b + b_step, ring.stage(it + 1), ring.entry(it + 1, 0), sc);
    __syncwarp();  // block it's stage and the raw tile are read
    soft(b + b_step, sc);
  }
  const int32_t last = n_iter - 1;
  values(b_first + last * b_step, ring.stage(last), ring.entry(last, 1));
}

}  // namespace gaacrt::cuda::attn
