// matvec_rows.cuh — the decode matvec's building blocks (matvec_q8.cu says how the dot products
// work): the quantized activations' layout, one warp's dot products of weight rows with them
// (rows_dots), activation quantization and the norm + quantize done inside a matvec's launch.
// Shared by matvec_q8.cu and the fused Q/K/V + RoPE + cache store of qkv_rope.cu.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "../block_traits.cuh"
#include "../cuda_common.h"
#include "../matvec_q8.cuh"
#include "matvec_pieces.cuh"
#include "quantize_act.cuh"
#include "row_norm.cuh"

namespace gaacrt::cuda::matvec {

constexpr int kRowsPerBlock = 4;

// Quantized activations as the dot products read them (global or shared memory): int8 values
// (n_tok, n_cols) (16-bit: their high bytes, and the low bytes in lo), and per 32 values the scale
// d, d·Σq and Σq.
struct XQ {
  const int8_t* q;
  const uint8_t* lo;
  const float *d, *s;
  const int32_t* n;  // Σq per 32 values (pieces with a kOffset take their offset off with it)
};

__host__ __device__ inline XQ xq_of(const Q8Act& a) { return XQ{a.q, a.lo, a.d, a.s, a.n}; }
// Token t's row of a.
__host__ __device__ inline Q8Act token_row(const Q8Act& a, int64_t t) {
  const int64_t nb = a.n_cols / 32;
  return Q8Act{a.q + t * a.n_cols, a.lo ? a.lo + t * a.n_cols : nullptr, a.d + t * nb, a.s + t * nb, a.n + t * nb,
               1, a.n_cols};
}

// A piece's per-byte offset left in its unpacked values (Piece::kOffset, else 0): the dot product
// subtracts kOffset · Σq once per 32 values instead of kOffset from every byte.
template <typename P, typename = void>
struct PieceOffset : std::integral_constant<int, 0> {};
template <typename P>
struct PieceOffset<P, std::void_t<decltype(P::kOffset)>> : std::integral_constant<int, P::kOffset> {};

// dp4a of signed weight bytes and unsigned activation bytes (the low bytes of 16-bit x).
__device__ __forceinline__ int dp4a_su(int a, int b, int c) {
#if defined(GAACRT_CUDA_EMULATION)
  for (int k = 0; k < 4; ++k) c += (int)(int8_t)(a >> (8 * k)) * (int)((unsigned)b >> (8 * k) & 0xFFu);
  return c;
#else
  int d;
  asm("dp4a.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#endif
}

// The W int8x4 words of x a piece's group meets (columns off(i) from xr), in as few loads as
// their layout allows: 32 contiguous bytes (regrouped Q4_0), 16 (Q8_0, K-quants' groups start on
// 16-byte columns), two runs of 8 (nibble types: 0-7 and 16-23, from an 8-byte column), or one run
// of 8 (Q6_K).
template <typename P>
__device__ __forceinline__ void load_x(const int8_t* xr, int (&xw)[P::W]) {
  if constexpr (P::W == 8) {
    static_assert(P::off(7) == 28, "32 contiguous bytes");
    const int4 a = *reinterpret_cast<const int4*>(xr), b = *reinterpret_cast<const int4*>(xr + 16);
    xw[0] = a.x; xw[1] = a.y; xw[2] = a.z; xw[3] = a.w;
    xw[4] = b.x; xw[5] = b.y; xw[6] = b.z; xw[7] = b.w;
  } else if constexpr (P::W == 4 && P::off(3) == 12) {
    const int4 v = *reinterpret_cast<const int4*>(xr);
    xw[0] = v.x; xw[1] = v.y; xw[2] = v.z; xw[3] = v.w;
  } else if constexpr (P::W == 4) {
    static_assert(P::off(1) == 4 && P::off(3) == P::off(2) + 4, "two runs of 8 bytes");
    const int2 a = *reinterpret_cast<const int2*>(xr), b = *reinterpret_cast<const int2*>(xr + P::off(2));
    xw[0] = a.x; xw[1] = a.y; xw[2] = b.x; xw[3] = b.y;
  } else {
    static_assert(P::W == 2 && P::off(1) == 4, "one run of 8 bytes");
    const int2 a = *reinterpret_cast<const int2*>(xr);
    xw[0] = a.x; xw[1] = a.y;
  }
}

__device__ __forceinline__ void prefetch_l2(const void* p) {
#if !defined(GAACRT_CUDA_EMULATION)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}

// One warp's dot products of R weight rows (R = 2: gate and up, a Q/K/V channel pair, or two rows
// of one matrix) with n_tok quantized activations, reduced over the warp. Lane i takes part i % L
// of blocks i / L, i / L + 32 / L, ... of each row (matvec_pieces.cuh), U blocks per batch, and
// double-buffers: the next batch's raw bytes are loaded before the current batch is unpacked and
// dotted, so a warp always has loads in flight. `prologue` runs once, by every lane: the kernels
// wait there for the previous kernel (PDL) and, if they quantize x themselves, do it there. The
// weights do not depend on earlier kernels, so the first batch is prefetched into L2 before it;
// its loads, though written before the prologue too, are moved after the wait by ptxas (seen in
// the SASS), prefetches are not.
// Every kernel sums in this one order, so they all give the same bits.
template <typename Block, int QK, int T, bool kQ16, int R, typename Prologue>
__device__ __forceinline__ void rows_dots(const uint8_t* const (&rows)[R], int n_cols, int n_tok, const XQ& x,
                                          int lane, float (&acc)[R][T], Prologue&& prologue) {
  using P = Piece<Block>;
  using Raw = typename P::Raw;
  constexpr int L = P::kLanes, kStride = kWarpSize / L;  // blocks one warp step covers
  constexpr int U = sizeof(Raw) <= 16 ? 4 : 2, kBatch = kStride * U;
  constexpr int kOff = PieceOffset<P>::value;
  static_assert(kOff == 0 || (P::G == 1 && P::W * 4 == 32), "an offset is taken off per whole 32-value group");
  const int n_blocks = n_cols / QK, n_sub = n_cols / 32, k = lane % L;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = 0.f;
  Raw cur[R][U], nxt[R][U];
  auto load = [&](Raw (&dst)[R][U], int b0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int b = min(b0 + kStride * u, n_blocks - 1);  // past the end: a valid block, unused
#pragma unroll
      for (int r = 0; r < R; ++r) dst[r][u] = piece_load<Block>(rows[r], b, k);
    }
  };
  int b0 = lane / L;
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int r = 0; r < R; ++r)
      prefetch_l2(piece_bytes<Block>(rows[r], min(b0 + kStride * u, n_blocks - 1), k));
  load(cur, b0);
  prologue();
  for (;;) {
    const int b1 = b0 + kBatch;
    const bool more = b1 < n_blocks;
    if (more) load(nxt, b1);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int b = b0 + kStride * u;
      if (b >= n_blocks) break;
      PieceVals<P::G, P::W> v[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if constexpr (kOff != 0) v[r] = P::unpack_raw(cur[r][u], k);
        else v[r] = P::unpack(cur[r][u], k);
      }
#pragma unroll
      for (int g = 0; g < P::G; ++g) {
        const int col = b * QK + v[0].col[g], xb = col / 32;
#pragma unroll
        for (int t = 0; t < T; ++t) {
          if (t >= n_tok) break;
          const int8_t* xr = x.q + t * n_cols + col;
          int xw[P::W], xl[kQ16 ? P::W : 1];
          load_x<P>(xr, xw);
          if constexpr (kQ16) load_x<P>(reinterpret_cast<const int8_t*>(x.lo) + t * n_cols + col, xl);
          const float xd = x.d[t * n_sub + xb];
          const float xs = P::kMin ? x.s[t * n_sub + xb] : 0.f;
          const int xn = kOff != 0 ? x.n[t * n_sub + xb] : 0;
#pragma unroll
          for (int r = 0; r < R; ++r) {
            int s = 0;
#pragma unroll
            for (int i = 0; i < P::W; ++i) s = __dp4a((int)v[r].w[g][i], xw[i], s);
            if constexpr (kQ16) {  // Σ w q = 256 Σ w h + Σ w l, |Σ| < 32 · 128 · 32767 < 2^27
              int sl = 0;
#pragma unroll
              for (int i = 0; i < P::W; ++i) sl = dp4a_su((int)v[r].w[g][i], xl[i], sl);
              s = s * 256 + sl;
            }
            if constexpr (kOff != 0) s -= kOff * xn;  // the same integer as offsetting every byte
            acc[r][t] += xd * (v[r].d[g] * (float)s);
            if (P::kMin) acc[r][t] += v[r].m[g] * xs;
          }
        }
      }
    }
    if (!more) break;
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) cur[r][u] = nxt[r][u];
    b0 = b1;
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) {
      if (t >= n_tok) break;
      acc[r][t] = warp_sum_f32(acc[r][t]);
    }
}

// The prologue of kernels whose x was quantized by an earlier kernel: wait for it (PDL).
struct WaitForX {
  __device__ void operator()() const { pdl_begin(); }
};

// quantize_q8_kernel's arithmetic for one 32-value block held by a warp (v: this lane's value),
// block blk of a (counted over all tokens): 8 bits into a.q; 16 bits as the high byte into a.q
// and the low byte into a.lo.
template <bool kQ16>
__device__ __forceinline__ void quantize_block(float v, int lane, const Q8Act& a, int64_t blk) {
  float d;
  const int q = quantize_value<kQ16>(v, warp_max_f32(fabsf(v)), d);
  a.q[blk * 32 + lane] = (int8_t)(kQ16 ? q >> 8 : q);
  if constexpr (kQ16) a.lo[blk * 32 + lane] = (uint8_t)(q & 255);
  const int sum = warp_sum_i32(q);
  if (lane == 0) stored_scales<kQ16>(d, sum, a.d + blk, a.s + blk, a.n + blk);
}

// x(n_tok, n_cols) -> a: per 32 values q (and lo), d, s = d · Σ q, n = Σ q. One warp per 32.
template <bool kQ16>
__global__ void quantize_q8_kernel(const float* __restrict__ x, int64_t n_blocks, Q8Act a) {
  pdl_begin();
  const int64_t blk = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (blk >= n_blocks) return;  // warp-uniform
  quantize_block<kQ16>(x[blk * 32 + lane], lane, a, blk);
}

// xn = rms_norm(x)·w (rms_norm.cu's rms_norm4_kernel, same bits: kernels/row_norm.cuh) and its
// int8 quantization per 32 values (quantize_block's arithmetic): a thread holds quads of x, so 8
// lanes hold one 32-block and meet by 3 shuffles. norm_quant_quad does quad i of a row whose
// quantization a (one token's) receives.
template <bool kQ16>
__device__ __forceinline__ void norm_quant_quad(float4 v, float4 g, float inv, int64_t i, bool live,
                                                float4* __restrict__ xn4, const Q8Act& a) {
  v = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
  for (int o = 4; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  float d;
  const int q0 = quantize_value<kQ16>(v.x, amax, d), q1 = quantize_value<kQ16>(v.y, amax, d);
  const int q2 = quantize_value<kQ16>(v.z, amax, d), q3 = quantize_value<kQ16>(v.w, amax, d);
  int sum = q0 + q1 + q2 + q3;
  for (int o = 4; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (!live) return;
  if (xn4) xn4[i] = v;
  constexpr int kHi = kQ16 ? 8 : 0;  // 16-bit: the high bytes here, the low bytes into xl
  reinterpret_cast<uint32_t*>(a.q)[i] = (uint32_t)((q0 >> kHi) & 0xff) | (uint32_t)((q1 >> kHi) & 0xff) << 8 |
                                        (uint32_t)((q2 >> kHi) & 0xff) << 16 | (uint32_t)((q3 >> kHi) & 0xff) << 24;
  if constexpr (kQ16)
    reinterpret_cast<uint32_t*>(a.lo)[i] =
        (uint32_t)(q0 & 0xff) | (uint32_t)(q1 & 0xff) << 8 | (uint32_t)(q2 & 0xff) << 16 | (uint32_t)(q3 & 0xff) << 24;
  if (i % 8 == 0) stored_scales<kQ16>(d, sum, a.d + i / 8, a.s + i / 8, a.n + i / 8);
}

// One row by a whole thread block (norm_threads(dim) threads, or more: the extra threads' zeros
// add nothing, so every block size from norm_threads(dim) up gives the same bits): the norm
// weights are loaded, then `wait` runs (the PDL wait of a kernel of its own), then x is read.
// xn4: where xn goes, or null.
template <bool kQ16, typename Wait>
__device__ __forceinline__ void norm_quant_row(const float4* __restrict__ xr, const float4* __restrict__ w4, float eps,
                                               int64_t dim, float4* __restrict__ xn4, const Q8Act& a, Wait&& wait) {
  const int64_t n4 = dim / 4;
  float4 c[kNormCache], g[kNormCache];
#pragma unroll
  for (int k = 0; k < kNormCache; ++k) {  // the norm weights are no kernel's output: loaded before the wait
    const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
    g[k] = i < n4 ? w4[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  wait();
  const float inv = row_inv_rms4(xr, n4, eps, c);
  // The shuffles need whole warps: a warp runs while its first quad is in the row (n4 is a
  // multiple of 8, so an 8-lane group is wholly in or out).
  const int64_t lane0 = threadIdx.x & ~(int64_t)(kWarpSize - 1);
#pragma unroll
  for (int k = 0; k < kNormCache; ++k) {
    const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
    if (lane0 + (int64_t)k * blockDim.x < n4) norm_quant_quad<kQ16>(c[k], g[k], inv, i, i < n4, xn4, a);
  }
  for (int64_t k = kNormCache; lane0 + k * blockDim.x < n4; ++k) {
    const int64_t i = threadIdx.x + k * blockDim.x;
    const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
    norm_quant_quad<kQ16>(i < n4 ? xr[i] : z, i < n4 ? w4[i] : z, inv, i, i < n4, xn4, a);
  }
}

// norm_quant_row over n_tok rows by a matvec's thread block, into a (shared memory); xn is
// written when asked (one block of the grid).
template <bool kQ16>
__device__ __forceinline__ void norm_quant_rows(const NormX& nx, int n_tok, int64_t dim, bool write_xn, const Q8Act& a) {
  for (int t = 0; t < n_tok; ++t) {
    float4* xn4 = write_xn ? reinterpret_cast<float4*>(nx.xn + t * dim) : nullptr;
    norm_quant_row<kQ16>(reinterpret_cast<const float4*>(nx.x + t * dim), reinterpret_cast<const float4*>(nx.w), nx.eps,
                         dim, xn4, token_row(a, t), [] {});
    __syncthreads();  // row_inv_rms4's shared partials are reused by the next row; the last publishes a
  }
}

// The warps of the thread blocks that quantize or norm x themselves (and where the norm runs in
// the matvec's launch, dim / 4 <= their threads).
constexpr int kSelfRows = 8;

// The warps of a thread block: kRowsPerBlock, or kSelfRows where every block norms and quantizes
// x itself (kNorm: its norm needs dim / 4 threads).
constexpr int rows_per_block(bool norm) { return norm ? kSelfRows : kRowsPerBlock; }
template <bool kNorm>
constexpr int rows_per_block() { return rows_per_block(kNorm); }

// The prologue of rows_dots for the kernels that read x: kNorm, norm and quantize it into shared
// memory (norm_quant_rows; block 0 also writes xn), else wait for the kernel that quantized it.
// x then points at the shared copy.
template <bool kNorm, bool kQ16>
struct XPrologue {
  XQ& x;
  const NormX& nx;
  int n_tok;
  int64_t dim;
  __device__ void operator()() const {
    pdl_begin();
    if constexpr (kNorm) {
      GAACRT_DYNAMIC_SMEM(smem);
      const Q8Act sx = q8_act(smem, n_tok, dim, kQ16);
      norm_quant_rows<kQ16>(nx, n_tok, dim, blockIdx.x == 0, sx);
      x = xq_of(sx);
    }
  }
};

// Runs f(std::integral_constant<int, T>{}): T = 1 for one token (the common decode step: half
// the registers of 8, so more warps in flight), else kMatvecQ8MaxTokens.
template <typename F>
void dispatch_tokens(int64_t n_tok, F&& f) {
  if (n_tok == 1) f(std::integral_constant<int, 1>{});
  else f(std::integral_constant<int, kMatvecQ8MaxTokens>{});
}

// Runs f(std::bool_constant<q16>{}): the kernels' activation precision as a template argument.
template <typename F>
void dispatch_bits(bool q16, F&& f) {
  if (q16) f(std::true_type{});
  else f(std::false_type{});
}

// Runs f(bt, nt, bits) for a kernel over w's rows and the activations a: w's block traits,
// dispatch_tokens' T and a's precision as types (the three dispatches every launch here makes).
template <typename F>
void dispatch_q8(const WeightView& w, const Q8Act& a, F&& f) {
  dispatch_bits(a.lo, [&](auto bits) {
    dispatch_tokens(a.n_tok, [&](auto nt) { dispatch_weight(w, [&](auto bt) { f(bt, nt, bits); }); });
  });
}

// Throws unless w can be dotted with n_tok quantized activations of n_cols (matvec_q8.cu).
void check_q8(const WeightView& w, int64_t n_tok, int64_t n_cols, const char* what);

// Shared bytes of the kNorm kernels: x quantized (one or two byte planes) and its scales.
inline size_t norm_smem_bytes(const Q8Act& a) { return xq_bytes(a.n_tok, a.n_cols, a.lo != nullptr); }

// Launches the kernel `pick(bt, nt, bits, kNorm)` returns (the dispatch_q8 types and whether the
// norm runs inside the launch) over `grid` blocks of one warp per row, with arguments (args,
// n_cols, n_tok, x, nx): the launch of the kernels that take a fused norm (matvec_q8_multi,
// matvec_q8_qkv_rope). norm: norm_in_launch's answer.
template <typename Args, typename Pick>
void launch_q8_norm_kernel(const WeightView& w0, const Q8Act& a, const NormX* norm, unsigned grid, const Args& args,
                           cudaStream_t stream, Pick&& pick) {
  const int R = rows_per_block(norm != nullptr);
  const NormX nx = norm ? *norm : NormX{};
  const size_t smem = norm ? norm_smem_bytes(a) : 0;
  dispatch_q8(w0, a, [&](auto bt, auto nt, auto bits) {
    auto run = [&](auto kernel) {
      launch_kernel(kernel, grid, R * kWarpSize, smem, stream, args, a.n_cols, (int)a.n_tok, xq_of(a), nx);
    };
    if (norm) run(pick(bt, nt, bits, std::true_type{}));
    else run(pick(bt, nt, bits, std::false_type{}));
  });
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

// Where a fused norm runs: inside the matvec's launch (norm is returned) where matvec_q8_norm_fits
// holds and the launch can take it (`can`: its weights share one type), else norm_quant_q8 into a
// now (null is returned: the launch then reads a).
inline const NormX* norm_in_launch(const NormX* norm, bool can, const Q8Act& a, cudaStream_t stream) {
  if (!norm || (can && matvec_q8_norm_fits(a.n_tok, a.n_cols, *norm))) return norm;
  norm_quant_q8(norm->x, norm->w, norm->eps, a.n_tok, a.n_cols, norm->xn, a, stream);
  return nullptr;
}

}  // namespace gaacrt::cuda::matvec
