// matmul_q8mma.cu — prefill-sized y(n_tok, n_rows) = x · wᵀ of quantized weights on int8 tensor
// cores (mma.sync m16n8k32 / m16n8k16, s8 x s8 -> s32), in the arithmetic of the decode matvec
// (matvec_q8.cu): x quantized to int8 per 32 values (quantize_q8: scale dx and sx = dx · Σ qx),
// the weights unpacked to int8 by matvec_pieces.cuh with a scale per 16 or 32 values and, for the
// types with a minimum, a min term per 32 values:
//
//   y[r][t] = Σ_slices dw[r][s] · dx[t][s] · Σ_{k in s} qw[r][k] · qx[t][k]  +  Σ_32-blocks mw[r][b] · sx[t][b]
//
// The integer sums are exact, so prefill and decode agree to the rounding of the scale products
// (tests/test_cuda_backend.py checks it), and the precision is the decode path's (and llama.cpp's
// MMQ): one int8 rounding of x per 32 values.
//
// Q16 (kQ16): x quantized as the CPU backend's default activations (backends/cpu/quantize_act.cpp
// quantize_row_q16, the same bits: q16 = round(x / d), d = amax / 32767), each q16 split into a
// signed high byte h and an unsigned low byte l (q16 = 256 h + l), two mma per slice (s8 x s8 on
// h, s8 x u8 on l) and Σ w q16 = 256 Σ w h + Σ w l, exact in int32 (|Σ| < 32 · 128 · 32767 < 2^27):
// the CPU's integers, at int8 tensor-core speed, without the int8 rounding of x that moved the
// lossy caches' logits (see matmul_mma.cuh).
//
// A thread block computes 64 weight rows x 64 (or 128) tokens, 256 columns a step: its threads
// unpack the rows' pieces into an int8 tile with their scales and copy the tokens' int8 values and
// scales, all in shared memory; then 8 warps (2 of 32 rows x 4 of 16 or 32 tokens) run one mma per
// 32-column slice (two of 16 for Q6_K's 16-value scales) per 16 x 8 tile and scale the integer
// results. (Loading each step's weights a step ahead into registers was measured and removed:
// pp512 5,405 against 5,551 tok/s without, the registers it took costing more than the latency it
// hid.) Every 32-column integer result is converted (the mma accumulates onto a magic float's
// bits: one subtraction instead of a quarter-rate I2F, and Q16's two parts joined by one
// addition) and scaled in fp32. That scaling, not the mma, bounds this kernel: on the H200 (Nsight
// Compute, one 4096 x 4096 q16 matmul of 512 tokens) about 80% of the warp instructions, the int8
// tensor pipe 15% busy; 331 µs per 8B-shape matmul with q16, 301 with q8
// (bench/results/cuda_h200.md, before the counts below). Q16 is the default prefill matmul
// (matmul_mma.cuh).
//
// SASS per warp and 256-column step, Q4_0 in the group-of-eight layout with q16 (cuobjdump, sm_90;
// the seventh session, on the CPU machine): a slice 115 -> 102 instructions (its 16 outputs' four
// float operations each, from seven: the magics above, and no per-slice moves of Q16's low-byte
// magic), the step's loads and unpacking 362 -> 271 (each 16-byte weight run one store, a 16-column
// slot's scale stored once instead of once per word, the tokens' places worked out once): 1,282 ->
// 1,087 for 32 x 16 outputs. With 128 tokens (GAACRT_CUDA_Q8MMA_TOKENS=128) 1,870 for 32 x 32,
// 935 per 32 x 16: the step's weights and the slices' A fragments serve twice the tokens.
// Twenty-third session, q8 (slice_scaled: the scale folded into the magic's subtraction; kFull:
// steps inside the matrices skip the bounds tests): a slice of the 128-token kernel's warp 134 ->
// 106 instructions, a step's loads and stores 358 -> 265, a Q4_0 step 1,430 -> 1,113; pp512 of the
// 8B shape with 8-bit x on an H100 12,286 / 12,367 -> 13,361 / 13,359 tok/s (+8.4%, one visit,
// alternating builds). The q16 kernels are unchanged (slice_scaled says why).
#include "matmul_q8mma.cuh"

#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "block_traits.cuh"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "kernels/activation.cuh"
#include "kernels/attention_ptx.cuh"
#include "kernels/matvec_pieces.cuh"
#include "kernels/quantize_act.cuh"
#include "matvec_q8.cuh"

namespace gaacrt::cuda {
namespace {

constexpr int kRowsT = 64, kKc = 256, kThreads = 256;

// The activations as the kernel reads them, (n_tok, n_cols) each: Q8 int8 values in hi (lo
// unused); Q16 the high bytes in hi and the low bytes in lo. Per 32 values the scale d and
// s = d · Σ q.
struct XAct {
  const int8_t* hi;
  const uint8_t* lo;
  const float *d, *s;
  int64_t n_tok;
};
constexpr int kRowB = kKc + 16;  // bytes per shared row: 16 spare bytes keep ldmatrix conflict-free
constexpr int kSl = kKc / 32;    // 32-column slices per step

// Shared memory of one thread block (kMin: the types with a min term; kQ16: two bytes per x;
// kToksT tokens).
template <bool kMin, bool kQ16, int kToksT>
struct alignas(16) Tile {
  int8_t w[kRowsT][kRowB];   // weight rows' int8 values of this step's columns
  int8_t x[kToksT][kRowB];   // tokens' int8 values (Q16: their high bytes)
  uint8_t xl[kQ16 ? kToksT : 1][kRowB];  // Q16: the low bytes
  // Scales and min terms: a slice's lanes read 8 rows (or 4 tokens) of one column of these, so
  // each row has one spare float: with 16 or 8 per row they fell on 2-4 banks (8.4M shared-load
  // bank conflicts in one 512-token q-projection).
  float dw[kRowsT][kKc / 16 + 1];  // weight scale per 16 columns
  float dx[kToksT][kSl + 1];       // x scale per 32 columns
  // min terms: one per piece word (4 columns; a group's first word carries the group's m, so every
  // word is written exactly once), summed per 32 columns (mw) before the slices use them.
  float mw4[kMin ? kRowsT : 1][kKc / 4];
  float mw[kMin ? kRowsT : 1][kSl + 1];
  float sx[kMin ? kToksT : 1][kSl + 1];
};

// The int8 mma forms (s8 x s8 and s8 x u8, k = 32 and 16) are attention_ptx.cuh's.
using attn::mma_s8_k32;
using attn::mma_s8_k16;
using attn::mma_s8u8_k32;
using attn::mma_s8u8_k16;

// Integer sums of magnitude below 2^22 become floats exactly in the mantissa of 1.5 · 2^23: the mma
// accumulators start at kMagic (the bits of 1.5 · 2^23), so the sum's bits read as a float are
// 1.5 · 2^23 + Σ, and one subtraction gives Σ (instead of a quarter-rate I2F, or an add and a
// subtraction). |Σ of 32 products| <= 32 · 128 · 255 < 2^20.
constexpr int kMagic = 0x4B400000;
constexpr float kMagicF = 12582912.f;  // 1.5 · 2^23
// Q16's high-byte sums start at the bits of 1.5 · 2^31 instead, where a float's unit in the last
// place is 256: the bits + Σh read as 1.5 · 2^31 + 256 Σh, the scaling by 256 for free. One
// subtraction of both magics (771 · 2^22, exact in fp32) leaves 256 Σh - 1.5 · 2^23, exact (a
// multiple of 256 below 2^28), and adding the low-byte float 1.5 · 2^23 + Σl gives 256 Σh + Σl
// rounded once: the bits of fmaf(Σh, 256, Σl), in two additions instead of three operations
// (tests/test_cuda_prefill_magic.py checks the identity at the extremes).
constexpr int kMagicHi = 0x4F400000;
constexpr float kMagicHiF = 3221225472.f + kMagicF;  // 1.5 · 2^31 + 1.5 · 2^23
static_assert(kMagicHiF == 771.f * 4194304.f, "both magics in one exact float");

// One slice's integer sum as a float: Q8 its only part (accumulated onto kMagic); Q16 256 h + l
// rounded once, as the CPU converts its exact int32 (h onto kMagicHi, l onto kMagic).
template <bool kQ16>
__device__ __forceinline__ float slice_sum(int ch, int cl) {
  if constexpr (kQ16) return __fadd_rn(__fsub_rn(__int_as_float(ch), kMagicHiF), __int_as_float(cl));
  return __fsub_rn(__int_as_float(ch), kMagicF);
}
constexpr int kMagicH(bool q16) { return q16 ? kMagicHi : kMagic; }  // the start of h's accumulators

// A k32 slice's sum times its weight scale dw. Q8 subtracts the magic inside a fused multiply-add:
// fma(bits, dw, nb) with nb = -1.5 · 2^23 · dw (one multiplication per row and slice), exact for
// every scale here (at most 19 significant bits: fp16 d, or d times a K-quant's 6- or 8-bit scale;
// the magic has two), so round((bits - magic) · dw): the bits of slice_sum · dw, in 2 float
// operations per output and slice with the FFMA of dx instead of 3
// (tests/test_cuda_prefill_magic.py). Q16 joins, then multiplies. (Folded the same way, with the
// magics moved to sum to 1.5 · 2^31, Q16 took 3 operations instead of 4 and rounded S · dw twice,
// ~1e-6 from the CPU; pp512 of the 8B shape on an H100 fell 3.3%, 9,494 against 9,807 tok/s,
// together with kFull below: twenty-third session, not separated.)
template <bool kQ16>
__device__ __forceinline__ float slice_bias(float dw) {
  return kQ16 ? 0.f : -kMagicF * dw;
}
template <bool kQ16>
__device__ __forceinline__ float slice_scaled(int ch, int cl, float dw, float nb) {
  if constexpr (kQ16) return __fmul_rn(slice_sum<true>(ch, cl), dw);
  return __fmaf_rn(__int_as_float(ch), dw, nb);
}

// x(n_tok, n_cols) -> Q16 in two byte planes, 8 lanes per 32 values, 4 each (one float4 load):
// quantize_row_q16's arithmetic (amax, d = amax / 32767 from amax >= 1e-30, q = round-half-even(x ·
// (1/d)) clamped to ±32767, s = d · Σq), then h = q >> 8 (floor), l = q & 255. (One value per
// lane took 14.6 µs for 512 x 4096, a quarter of the bandwidth.)
constexpr int kQ16Lanes = 8;
__global__ void quantize_q16_kernel(const float* __restrict__ x, int64_t n_blocks, int8_t* __restrict__ hi,
                                    uint8_t* __restrict__ lo, float* __restrict__ xd, float* __restrict__ xs) {
  pdl_begin();
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, blk = t / kQ16Lanes;
  const bool in = blk < n_blocks;  // whole 8-lane groups; every lane stays for the shuffles
  const float4 v = in ? reinterpret_cast<const float4*>(x)[t] : make_float4(0.f, 0.f, 0.f, 0.f);
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
  for (int o = kQ16Lanes / 2; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  float d;
  const float vs[4] = {v.x, v.y, v.z, v.w};
  uint32_t h = 0, l = 0;
  int sum = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int q = quantize_value<true>(vs[i], amax, d);
    sum += q;
    h |= (uint32_t)((q >> 8) & 255) << (8 * i);
    l |= (uint32_t)(q & 255) << (8 * i);
  }
  for (int o = kQ16Lanes / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (!in) return;
  reinterpret_cast<uint32_t*>(hi)[t] = h;
  reinterpret_cast<uint32_t*>(lo)[t] = l;
  if (t % kQ16Lanes == 0) {
    xd[blk] = d;
    xs[blk] = d * (float)sum;
  }
}

// Whether a piece's words lie at columns 0, 4, 8, ...
template <typename P>
constexpr bool contiguous_words() {
  for (int j = 0; j < P::W; ++j)
    if (P::off(j) != 4 * j) return false;
  return true;
}

// Up to three weights of one type and width read with one x in one launch (MmaGroup): job j's
// row tiles are blockIdx.x in [tile_end of j - 1, tile_end of j). GateAct: jobs 0 and 1 are gate
// and up, and a thread block's 64 rows are 32 of gate and the same 32 of up.
struct Job {
  const uint8_t* w;
  size_t row_stride;
  int64_t n_rows;
  float* y;
  const float* bias;
  int32_t tile_end;
};
struct Jobs {
  Job j[kMaxMmaJobs];
  MmaEpilogue ep;
  int32_t act;  // GateAct: Activation::SiLU or GeluTanh
};

template <typename Block, int QK, bool kQ16, int kToksT>
__global__ void __launch_bounds__(kThreads, 2) matmul_q8mma_kernel(Jobs jobs, int64_t n_cols, XAct a) {
  using P = Piece<Block>;
  constexpr bool kMin = P::kMin;
  // Q6_K's scale changes every 16 columns: two k16 mma per slice instead of one k32.
  constexpr bool k16 = std::is_same_v<typename StoredBlock<Block>::block, block_q6_k>;
  constexpr int L = P::kLanes, kBpc = kKc / QK;  // lanes per block, weight blocks per row in a step
  static_assert(kKc % QK == 0, "a step holds whole blocks");
  // A piece of one lane and one group holds its whole block (column 0 on); with 4-column words at
  // 0, 4, 8, ... it is stored in 16-byte runs.
  constexpr bool kWholeBlockPiece = L == 1 && P::G == 1 && P::W * 4 == QK && contiguous_words<P>();
  pdl_begin();
  GAACRT_DYNAMIC_SMEM(smem);
  Tile<kMin, kQ16, kToksT>& T = *reinterpret_cast<Tile<kMin, kQ16, kToksT>*>(smem);
  constexpr int kWarpToks = kToksT / 4, NT = kWarpToks / 8;  // a warp's tokens and its n-tiles of 8
  // This block's job (selected field by field: an index into the parameters would copy them to
  // local memory) and first row; GateAct's tiles are 32 rows of each of its two weights.
  const bool gate = jobs.ep == MmaEpilogue::GateAct;
  const int jb = (int)blockIdx.x < jobs.j[0].tile_end ? 0 : ((int)blockIdx.x < jobs.j[1].tile_end ? 1 : 2);
  const Job J = jb == 0 ? jobs.j[0] : (jb == 1 ? jobs.j[1] : jobs.j[2]);
  const int64_t n_rows = J.n_rows;
  const int64_t row0 = (int64_t)((int)blockIdx.x - (jb == 0 ? 0 : (jb == 1 ? jobs.j[0].tile_end : jobs.j[1].tile_end))) *
                       (gate ? kRowsT / 2 : kRowsT);
  const int64_t tok0 = (int64_t)blockIdx.y * kToksT, n_tok = a.n_tok;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
  const int wr = warp & 1, wt = warp >> 1;  // this warp's rows 32 wr.., tokens kWarpToks wt..
  const int mi = lane >> 3, ri = lane & 7;  // ldmatrix: this lane's matrix and row
  const int64_t n_blocks = n_cols / QK, n_sub = n_cols / 32;
  float acc[2][NT][4] = {};  // [m-tile of 16 rows][n-tile of 8 tokens][fragment]

  // Each step loads its weight pieces into registers, unpacks them into the tile, and copies x.
  constexpr int kWT = kRowsT * kBpc * L / kThreads;  // weight pieces a thread loads per step
  constexpr int kXT = kToksT * (kKc / 16) / kThreads;  // 16-byte chunks of x
  constexpr int kST = kToksT * kSl / kThreads;         // x scales
  static_assert(kWT * kThreads == kRowsT * kBpc * L && kXT * kThreads == kToksT * (kKc / 16) &&
                kST * kThreads == kToksT * kSl, "whole tasks per thread");
  typename P::Raw w_raw[kWT];
  // Task i of this thread: weight piece t = threadIdx.x + i * kThreads is (row r, block bi, piece
  // k); x chunk t of 16 bytes is (token tk, column c); x scale t is (token tk, slice sl). Only the
  // row or token moves with i, only the columns from step to step: the rows' pointers are worked
  // out once (null past the end), and x's places as the block's start (the same for all threads)
  // plus a 32-bit offset within the block's tokens (the launcher keeps n_cols below 2^24).
  const uint8_t* w_row[kWT];
#pragma unroll
  for (int i = 0; i < kWT; ++i) {
    const int r = (threadIdx.x + i * kThreads) / (kBpc * L);
    const bool up = gate && r >= kRowsT / 2;  // GateAct: the tile's second half is up's rows
    const int64_t row = row0 + (up ? r - kRowsT / 2 : r);
    w_row[i] = row < n_rows ? (up ? jobs.j[1].w + row * jobs.j[1].row_stride : J.w + row * J.row_stride) : nullptr;
  }
  const int toks_here = (int)(n_tok - tok0 < kToksT ? n_tok - tok0 : kToksT);  // tokens of this block
  const bool block_full = toks_here == kToksT && row0 + (gate ? kRowsT / 2 : kRowsT) <= n_rows;
  const int8_t* const xh = a.hi + tok0 * n_cols;
  const uint8_t* const xl = kQ16 ? a.lo + tok0 * n_cols : nullptr;
  const float* const xd = a.d + tok0 * n_sub;
  const float* const xs = kMin ? a.s + tok0 * n_sub : nullptr;
  // kFull (a std::bool_constant): every row, token and column of this step lies inside the
  // matrices, so no bounds tests (the block-uniform test is made once per step). Q8 alone: with
  // the q16 kernels the compiler then reloaded a spilled row pointer at every step (slice_scaled).
  auto load_weights = [&](int64_t c0, auto kFull) {
#pragma unroll
    for (int i = 0; i < kWT; ++i) {  // past the matrix a zero piece (scale 0, min 0)
      const int t = threadIdx.x + i * kThreads, bi = (t / L) % kBpc, k = t % L;
      const int64_t b = c0 / QK + bi;
      if constexpr (decltype(kFull)::value) {
        w_raw[i] = piece_load<Block>(w_row[i], b, k);
      } else {
        w_raw[i] = typename P::Raw{};
        if (w_row[i] && b < n_blocks) w_raw[i] = piece_load<Block>(w_row[i], b, k);
      }
    }
  };
  auto store_step = [&](int64_t c0, auto kFull) {
    constexpr bool full = decltype(kFull)::value;
#pragma unroll
    for (int i = 0; i < kWT; ++i) {
      const int t = threadIdx.x + i * kThreads, r = t / (kBpc * L), bi = (t / L) % kBpc, k = t % L;
      const PieceVals<P::G, P::W> v = P::unpack(w_raw[i], k);
#pragma unroll
      for (int gi = 0; gi < P::G; ++gi) {
        // The words first (a single-lane piece's 4-word runs as one 16-byte store), then the
        // scales: every word of a 16-column slot carries the same one, so the word at the slot's
        // start writes it.
        if constexpr (kWholeBlockPiece) {
#pragma unroll
          for (int j = 0; j < P::W; j += 4)
            *reinterpret_cast<uint4*>(&T.w[r][bi * QK + P::off(j)]) =
                make_uint4(v.w[gi][j], v.w[gi][j + 1], v.w[gi][j + 2], v.w[gi][j + 3]);
        } else {
#pragma unroll
          for (int j = 0; j < P::W; ++j)
            *reinterpret_cast<uint32_t*>(&T.w[r][bi * QK + v.col[gi] + P::off(j)]) = v.w[gi][j];
        }
#pragma unroll
        for (int j = 0; j < P::W; ++j) {
          const int c = bi * QK + v.col[gi] + P::off(j);
          if (c % 16 == 0) T.dw[r][c / 16] = v.d[gi];
          if constexpr (kMin) T.mw4[r][c / 4] = j == 0 ? v.m[gi] : 0.f;
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kXT; ++i) {  // past the end zeros (scale 0)
      const int t = threadIdx.x + i * kThreads, tk = t / (kKc / 16), c = (t % (kKc / 16)) * 16;
      const int32_t at = tk * (int32_t)n_cols + c;
      int4 h = make_int4(0, 0, 0, 0), l = make_int4(0, 0, 0, 0);
      if (full || (tk < toks_here && c0 + c < n_cols)) {  // n_cols is a multiple of 32: whole chunks
        h = *reinterpret_cast<const int4*>(xh + c0 + at);
        if constexpr (kQ16) l = *reinterpret_cast<const int4*>(xl + c0 + at);
      }
      *reinterpret_cast<int4*>(&T.x[tk][c]) = h;
      if constexpr (kQ16) *reinterpret_cast<int4*>(&T.xl[tk][c]) = l;
    }
#pragma unroll
    for (int i = 0; i < kST; ++i) {
      const int t = threadIdx.x + i * kThreads, tk = t / kSl, sl = t % kSl;
      const int32_t at = tk * (int32_t)n_sub + sl;
      const bool in = full || (tk < toks_here && c0 / 32 + sl < n_sub);
      T.dx[tk][sl] = in ? xd[c0 / 32 + at] : 0.f;
      if constexpr (kMin) T.sx[tk][sl] = in ? xs[c0 / 32 + at] : 0.f;
    }
  };

  for (int64_t c0 = 0; c0 < n_cols; c0 += kKc) {
    if (!kQ16 && c0 + kKc <= n_cols && block_full) {  // (q16: see slice_scaled)
      load_weights(c0, std::true_type{});
      store_step(c0, std::true_type{});
    } else {
      load_weights(c0, std::false_type{});
      store_step(c0, std::false_type{});
    }
    __syncthreads();
    if constexpr (kMin) {  // the words' min terms per 32 columns, in word order
      for (int t = threadIdx.x; t < kRowsT * kSl; t += kThreads) {
        const int r = t / kSl, sl = t % kSl;
        float m = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j) m += T.mw4[r][8 * sl + j];
        T.mw[r][sl] = m;
      }
      __syncthreads();
    }
#pragma unroll 1
    for (int s = 0; s < kSl; ++s) {
      const int kk = 32 * s;
      uint32_t af[2][4], bf[NT / 2][4], bl[NT / 2][4];  // B: [pair of n-tiles][n-tile, k half]
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) attn::ldmatrix_x4(af[mt], &T.w[32 * wr + 16 * mt + 8 * (mi & 1) + ri][kk + 16 * (mi >> 1)]);
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        const int tk = kWarpToks * wt + 16 * np + 8 * (mi >> 1) + ri;
        attn::ldmatrix_x4(bf[np], &T.x[tk][kk + 16 * (mi & 1)]);
        if constexpr (kQ16) attn::ldmatrix_x4(bl[np], &T.xl[tk][kk + 16 * (mi & 1)]);
      }
      float sxv[NT][2], dxv[NT][2];  // [n-tile][token 2 tig + j]
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int tk = kWarpToks * wt + 8 * nt + 2 * tig + j;
          dxv[nt][j] = T.dx[tk][s];
          sxv[nt][j] = kMin ? T.sx[tk][s] : 0.f;
        }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        float dw0[2], dw1[2], mwv[2], nb[2];  // rows g, g + 8 of the m-tile
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = 32 * wr + 16 * mt + g + 8 * h;
          dw0[h] = T.dw[r][2 * s];
          dw1[h] = k16 ? T.dw[r][2 * s + 1] : 0.f;
          mwv[h] = kMin ? T.mw[r][s] : 0.f;
          nb[h] = slice_bias<kQ16>(dw0[h]);
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const uint32_t* b = bf[nt / 2] + 2 * (nt % 2);  // this n-tile's k halves
          const uint32_t* bq = bl[nt / 2] + 2 * (nt % 2);
          // c0: columns 0-31 (k16: 0-15, c1: 16-31); l0 / l1: Q16's low-byte parts.
          constexpr int mh = kMagicH(kQ16);
          int c0i[4] = {mh, mh, mh, mh}, c1i[4] = {mh, mh, mh, mh};
          int l0i[4] = {kMagic, kMagic, kMagic, kMagic}, l1i[4] = {kMagic, kMagic, kMagic, kMagic};
          if constexpr (k16) {
            mma_s8_k16(c0i, af[mt][0], af[mt][1], b[0]);
            mma_s8_k16(c1i, af[mt][2], af[mt][3], b[1]);
            if constexpr (kQ16) {
              mma_s8u8_k16(l0i, af[mt][0], af[mt][1], bq[0]);
              mma_s8u8_k16(l1i, af[mt][2], af[mt][3], bq[1]);
            }
          } else {
            mma_s8_k32(c0i, af[mt], b[0], b[1]);
            if constexpr (kQ16) mma_s8u8_k32(l0i, af[mt], bq[0], bq[1]);
          }
#pragma unroll
          for (int e = 0; e < 4; ++e) {  // fragment e: row g + 8 (e / 2), token 2 tig + e % 2
            const int h = e >> 1, j = e & 1;
            float v = slice_scaled<kQ16>(c0i[e], l0i[e], dw0[h], nb[h]);
            if constexpr (k16) v += slice_sum<kQ16>(c1i[e], l1i[e]) * dw1[h];
            acc[mt][nt][e] = fmaf(v, dxv[nt][j], acc[mt][nt][e]);
            if constexpr (kMin) acc[mt][nt][e] = fmaf(mwv[h], sxv[nt][j], acc[mt][nt][e]);
          }
        }
      }
    }
    __syncthreads();
  }
  // C: lane holds rows g and g + 8 of each m-tile, tokens 2 tig and 2 tig + 1 of each n-tile.
  // GateAct: the up warps (wr = 1) hand their sums through shared memory (the tile is free: the
  // loop ended on a barrier) to the gate warps holding the same rows and tokens, which write
  // act(gate) · up: elementwise.cu's act_mul on the two results, in one launch.
  float* ex = reinterpret_cast<float*>(smem) + (size_t)wt * (2 * NT * 4 * kWarpSize) + lane;
  if (gate) {
    if (wr == 1)
#pragma unroll
      for (int i = 0; i < 2 * NT * 4; ++i) ex[i * kWarpSize] = (&acc[0][0][0])[i];
    __syncthreads();
    if (wr == 1) return;
  }
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t row = row0 + 32 * wr + 16 * mt + g + 8 * (e >> 1);  // GateAct: wr = 0 here
        const int64_t tok = tok0 + kWarpToks * wt + 8 * nt + 2 * tig + (e & 1);
        const float a = acc[mt][nt][e];
        if (row >= n_rows || tok >= n_tok) continue;
        float* out = J.y + tok * n_rows + row;
        if (gate) {
          const float u = ex[((mt * NT + nt) * 4 + e) * kWarpSize];
          *out = jobs.act == 0 ? act_gate<0>(a, u) : act_gate<1>(a, u);
        } else {
          const float v = J.bias ? a + J.bias[row] : a;
          *out = jobs.ep == MmaEpilogue::Add ? *out + v : v;  // Add: the matmul_add's residual, y + (x · wᵀ)
        }
      }
}

template <typename Block, int QK, bool kQ16, int kToksT>
void launch(const Jobs& jobs, int n_jobs, int64_t n_cols, const XAct& a, cudaStream_t stream) {
  constexpr auto kernel = matmul_q8mma_kernel<Block, QK, kQ16, kToksT>;
  constexpr size_t smem = sizeof(Tile<Piece<Block>::kMin, kQ16, kToksT>);
  static_assert(smem >= sizeof(float) * kThreads / 2 * 2 * (kToksT / 32) * 4, "GateAct's exchange fits the tile");
  allow_dynamic_smem<kernel>(smem);
  const dim3 grid((unsigned)jobs.j[n_jobs - 1].tile_end, (unsigned)((a.n_tok + kToksT - 1) / kToksT));
  launch_kernel(kernel, grid, kThreads, smem, stream, jobs, n_cols, a);
}

}  // namespace

// 128 by default: pp512 of the 8B shape, q16, H200 (eighth session, one visit): 64-token tiles
// 7,502 tok/s, 128 8,856, auto 8,699. GAACRT_CUDA_Q8MMA_TOKENS=64 or =auto (below) otherwise.
int matmul_q8mma_token_tile() {
  const char* e = std::getenv("GAACRT_CUDA_Q8MMA_TOKENS");
  if (e && std::strcmp(e, "auto") == 0) return 0;
  return e && std::atoi(e) == 64 ? 64 : 128;
}

namespace {
// GAACRT_CUDA_Q8MMA_TOKENS=auto: the tile whose grid finishes first if every thread block of a tile
// size takes the same time, two of them per SM: whole waves times the block's time, a 128-token
// block taking kWideCost of a 64-token one (its SASS per step: 1,870 against 1,087 for Q4_0 q16; a
// guess until measured). A 512-token prefill of the 8B shape: Q/K/V (96 row tiles) 64, o and down
// (64) 128, gate/up (448 half tiles) 128.
constexpr double kWideCost = 1.75;
bool auto_wide(int64_t row_tiles, int64_t n_tok, int sms) {
  const int64_t slots = 2LL * sms;
  const int64_t narrow = row_tiles * ((n_tok + 63) / 64), wide = row_tiles * ((n_tok + 127) / 128);
  return (double)((wide + slots - 1) / slots) * kWideCost < (double)((narrow + slots - 1) / slots);
}
}  // namespace

// The quantized x: 8 bits is quantize_q8's layout (q, d, s and the Σq array n: xq_bytes), 16 bits
// quantize_q16_kernel's (high bytes, low bytes, d, s: within xq_bytes too).
size_t matmul_q8mma_scratch_bytes(int64_t n_tok, int64_t n_cols, bool q16) { return xq_bytes(n_tok, n_cols, q16) + 64; }

bool matmul_q8mma_group(const MmaGroup& grp, const float* x, int64_t n_tok, bool q16, void* scratch,
                        cudaStream_t stream) {
  if (grp.n < 1 || grp.n > kMaxMmaJobs) return false;
  if (grp.ep == MmaEpilogue::GateAct &&  // an unknown activation: act_mul's error, on the fallback
      (grp.n != 2 || (grp.act != Activation::SiLU && grp.act != Activation::GeluTanh)))
    return false;
  const WeightView& w = grp.w[0];
  for (int i = 0; i < grp.n; ++i) {
    const WeightView& wi = grp.w[i];
    // One kernel reads them all: one type and one layout (GAACRT_CUDA_GROUP8 is read per weight).
    if (wi.type != w.type || wi.layout != w.layout || wi.n_cols != w.n_cols || wi.n_rows <= 0) return false;
    if (grp.ep == MmaEpilogue::GateAct && (wi.n_rows != w.n_rows || (grp.bias && grp.bias[i]))) return false;
  }
  if (w.n_cols % 32 != 0 || w.n_cols >= (1 << 24) || n_tok > 65535LL * 64 || !matvec_q8_supported(w.type)) return false;
  if (q16 && reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;  // quantize_q16_kernel reads float4
  for (int i = 0; i < grp.n; ++i) check_q8_alignment(grp.w[i], "matmul_q8mma");
  Jobs jobs{};
  jobs.ep = grp.ep;
  jobs.act = (int32_t)grp.act;
  const int rows_per_tile = grp.ep == MmaEpilogue::GateAct ? kRowsT / 2 : kRowsT;
  int64_t tiles = 0;
  for (int i = 0; i < kMaxMmaJobs; ++i) {
    if (i < grp.n) {
      const WeightView& wi = grp.w[i];
      // GateAct: up's rows ride in gate's tiles, its job adds none.
      if (!(grp.ep == MmaEpilogue::GateAct && i == 1)) tiles += (wi.n_rows + rows_per_tile - 1) / rows_per_tile;
      jobs.j[i] = Job{static_cast<const uint8_t*>(wi.data), wi.row_stride, wi.n_rows, grp.y[i],
                      grp.bias ? grp.bias[i] : nullptr, (int32_t)tiles};
    } else {
      jobs.j[i] = jobs.j[i - 1];  // past the last job: its copy (never selected)
    }
  }
  if (tiles > 0x7FFFFFFF) return false;
  XAct a{};
  a.n_tok = n_tok;
  if (q16) {  // scratch: high bytes, low bytes, then d and s (16-byte aligned: n_cols % 32 == 0)
    auto* hi = static_cast<int8_t*>(scratch);
    auto* lo = reinterpret_cast<uint8_t*>(hi + n_tok * w.n_cols);
    auto* d = reinterpret_cast<float*>(lo + n_tok * w.n_cols);
    const int64_t n_blocks = n_tok * (w.n_cols / 32);
    launch_kernel(quantize_q16_kernel, (unsigned)((n_blocks * kQ16Lanes + 255) / 256), 256, 0, stream, x, n_blocks,
                  hi, lo, d, d + n_blocks);
    GAACRT_CUDA_CHECK(cudaGetLastError());
    a = XAct{hi, lo, d, d + n_blocks, n_tok};
  } else {
    const Q8Act q = quantize_q8(x, n_tok, w.n_cols, scratch, stream, false);
    a = XAct{q.q, nullptr, q.d, q.s, n_tok};
  }
  int device = 0;
  GAACRT_CUDA_CHECK(cudaGetDevice(&device));
  const int tile = matmul_q8mma_token_tile();
  const bool wide_asked = tile == 128 || (tile == 0 && auto_wide(tiles, n_tok, device_attr<cudaDevAttrMultiProcessorCount>(device)));
  const int n_jobs = grp.ep == MmaEpilogue::GateAct ? 1 : grp.n;  // the jobs that own tiles
  return dispatch_weight(w, [&](auto bt) {
    using BT = decltype(bt);
    // 128 tokens where the device lets a thread block have the tile (up to 117 KiB; sm_86/89
    // allow 99): else 64.
    const bool wide = wide_asked && sizeof(Tile<Piece<typename BT::block>::kMin, true, 128>) <=
                                        (size_t)max_dynamic_smem(device);
    if (q16) {
      if (wide) launch<typename BT::block, BT::qk, true, 128>(jobs, n_jobs, w.n_cols, a, stream);
      else launch<typename BT::block, BT::qk, true, 64>(jobs, n_jobs, w.n_cols, a, stream);
    } else {
      if (wide) launch<typename BT::block, BT::qk, false, 128>(jobs, n_jobs, w.n_cols, a, stream);
      else launch<typename BT::block, BT::qk, false, 64>(jobs, n_jobs, w.n_cols, a, stream);
    }
  });
}

bool matmul_q8mma(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, bool q16,
                  void* scratch, cudaStream_t stream) {
  float* const ys[1] = {y};
  const float* const bs[1] = {bias};
  return matmul_q8mma_group(MmaGroup{&w, 1, ys, bs}, x, n_tok, q16, scratch, stream);
}

}  // namespace gaacrt::cuda
