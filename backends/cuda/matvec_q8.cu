// matvec_q8.cu — decode-sized matmul: activations quantized per 32 values (scale d_x and d_x·Σq
// kept in fp32), weights unpacked to int8x4 words and dotted with dp4a.
//
// Two activation precisions, the CPU backend's two (BackendParams::act_bits): 16 bits, the
// default (q = round(x / d), d = amax / 32767: backends/cpu/quantize_act.cpp quantize_row_q16, the
// same bits), stored as a signed high byte h and an unsigned low byte l (q = 256 h + l) and dotted
// as 256 · dp4a(w, h) + dp4a(w, l), exact in int32; or 8 bits (d = amax / 127), llama.cpp's
// precision and the CPU's Q8_0 / Q8_1 integers and fp16 scales (kernels/quantize_act.cuh), one dp4a. On real weights the 8-bit rounding moves the logits far more than the
// test bound of GPU vs CPU (SmolLM2-135M: relative L2 up to 0.13 between the CPU's own 8- and
// 16-bit runs), so the GPU follows the CPU's setting.
//
// Every supported weight type is brought to one form per group of values inside a 32-block of x:
//     w_i = d_g · q_i + m     (q_i int8; d_g the group's scale, so Q6_K's per-16 scales fit)
// so  Σ w_i x_i ≈ d_x · d_g · Σ q_i xq_i + m · (d_x Σ xq_i),
// the same algebra the CPU's vec_dot kernels use (Q4_0's -8 is inside q_i; Q4_1/K-quants' mins go
// through m). One warp per output row; lanes share blocks so each load is contiguous across the
// warp (kernels/matvec_pieces.cuh); up to 8 tokens at once, so a weight row is read once for all.
#include <cstdlib>
#include <type_traits>

#include "block_traits.cuh"
#include "common/half.h"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "kernels/matvec_pieces.cuh"
#include "kernels/quantize_act.cuh"
#include "kernels/row_norm.cuh"
#include "matvec_q8.cuh"

namespace gaacrt::cuda {
namespace {

constexpr int kRowsPerBlock = 4;

// Quantized activations as the dot products read them (global or shared memory): int8 values
// (n_tok, n_cols) (16-bit: their high bytes, and the low bytes in lo), and per 32 values the scale
// d and d·Σq.
struct XQ {
  const int8_t* q;
  const uint8_t* lo;
  const float *d, *s;
  const int32_t* n;  // Σq per 32 values (pieces with a kOffset take their offset off with it)
};

// The layout of quantized activations in a buffer (the global scratch, or a kernel's shared
// memory): q (n_tok · n_cols bytes), with 16 bits lo (as many), then per 32 values d, s and n.
__host__ __device__ inline size_t xq_bytes(int64_t n_tok, int64_t n_cols, bool q16) {
  return (q16 ? 2 : 1) * (size_t)n_tok * n_cols + (2 * sizeof(float) + sizeof(int32_t)) * (size_t)n_tok * (n_cols / 32);
}
__host__ __device__ inline Q8Act carve_xq(void* base, int64_t n_tok, int64_t n_cols, bool q16) {
  Q8Act a;
  a.q = static_cast<int8_t*>(base);
  a.lo = q16 ? reinterpret_cast<uint8_t*>(a.q + n_tok * n_cols) : nullptr;
  a.d = reinterpret_cast<float*>(a.q + (q16 ? 2 : 1) * n_tok * n_cols);  // n_cols % 32 == 0: aligned
  a.s = a.d + n_tok * (n_cols / 32);
  a.n = reinterpret_cast<int32_t*>(a.s + n_tok * (n_cols / 32));
  a.n_tok = n_tok;
  a.n_cols = n_cols;
  return a;
}
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
  int d;
  asm("dp4a.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
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

__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// One warp's dot products of R weight rows (R = 2: gate and up) with n_tok quantized activations,
// reduced over the warp. Lane i takes part i % L of blocks i / L, i / L + 32 / L, ... of each
// row (matvec_pieces.cuh), U blocks per batch, and double-buffers: the next batch's raw bytes
// are loaded before the current batch is unpacked and dotted, so a warp always has loads in
// flight. `prologue` runs once, by every lane: the kernels wait there for the previous kernel
// (PDL) and, if they quantize x themselves, do it there. The weights do not depend on earlier
// kernels, so the first batch is prefetched into L2 before it; its loads, though written before
// the prologue too, are moved after the wait by ptxas (seen in the SASS), prefetches are not.
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

template <typename Block, int QK, int T, bool kQ16, bool kAccumulate>
__global__ void __launch_bounds__(kRowsPerBlock * kWarpSize)
matvec_q8_kernel(const uint8_t* __restrict__ w, size_t row_stride, int64_t n_rows, int64_t n_cols, int n_tok,
                 XQ x, float* __restrict__ y, const float* __restrict__ bias) {
  const int64_t row = (int64_t)blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= n_rows) return;
  float acc[1][T];
  const uint8_t* rows[1] = {w + row * row_stride};
  rows_dots<Block, QK, T, kQ16>(rows, (int)n_cols, n_tok, x, lane, acc, WaitForX{});
#pragma unroll
  for (int t = 0; t < T; ++t) {
    if (t >= n_tok) break;
    if (lane != 0) continue;
    const float v = bias ? acc[0][t] + bias[row] : acc[0][t];
    if (kAccumulate) y[(int64_t)t * n_rows + row] += v;  // what add_kernel does with the stored v
    else y[(int64_t)t * n_rows + row] = v;
  }
}

// Decode matmul in one launch: every thread block quantizes x itself into shared memory (the
// same arithmetic as quantize_q8_kernel), then its warps take one row each. Eight warps, each
// loading its share of x (up to kSelfUnroll blocks of 32) before quantizing any of it; the
// quantization is rows_dots' prologue, so the weights' first loads are already in flight.
constexpr int kSelfRows = 8, kSelfUnroll = 4;
template <typename Block, int QK, int T, bool kQ16, bool kAccumulate>
__global__ void __launch_bounds__(kSelfRows * kWarpSize)
matvec_q8_self_kernel(const uint8_t* __restrict__ w, size_t row_stride, int64_t n_rows, int64_t n_cols, int n_tok,
                      const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ bias) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int64_t n_blocks = n_tok * (n_cols / 32);
  const Q8Act sx = carve_xq(smem, n_tok, n_cols, kQ16);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t row = (int64_t)blockIdx.x * kSelfRows + warp;
  auto quantize_x = [&] {
    pdl_begin();
    for (int64_t b0 = warp; b0 < n_blocks; b0 += kSelfRows * kSelfUnroll) {
      float v[kSelfUnroll];
#pragma unroll
      for (int u = 0; u < kSelfUnroll; ++u) {
        const int64_t blk = b0 + u * kSelfRows;
        v[u] = blk < n_blocks ? x[blk * 32 + lane] : 0.f;
      }
#pragma unroll
      for (int u = 0; u < kSelfUnroll; ++u) {
        const int64_t blk = b0 + u * kSelfRows;  // warp-uniform
        if (blk < n_blocks) quantize_block<kQ16>(v[u], lane, sx, blk);
      }
    }
    __syncthreads();
  };
  float acc[1][T];
  // Every warp takes part in the quantization: one past the last row reads the last row, unused.
  const uint8_t* rows[1] = {w + (row < n_rows ? row : n_rows - 1) * row_stride};
  rows_dots<Block, QK, T, kQ16>(rows, (int)n_cols, n_tok, xq_of(sx), lane, acc, quantize_x);
  if (row >= n_rows) return;
#pragma unroll
  for (int t = 0; t < T; ++t) {
    if (t >= n_tok) break;
    if (lane != 0) continue;
    const float v = bias ? acc[0][t] + bias[row] : acc[0][t];
    if (kAccumulate) y[(int64_t)t * n_rows + row] += v;  // what add_kernel does with the stored v
    else y[(int64_t)t * n_rows + row] = v;
  }
}

// Up to three matrices of one type and width over the same quantized x (Q, K, V) in one launch.
struct MultiArgs {
  const uint8_t* w[3];
  size_t stride[3];
  int64_t rows[3];
  float* y[3];
  const float* bias[3];
  unsigned first[4];  // first thread block of each matrix; first[n_w] = the grid
};

// The warps of a thread block: kRowsPerBlock, or kSelfRows where every block norms and quantizes
// x itself (kNorm: its norm needs dim / 4 threads).
template <bool kNorm>
constexpr int rows_per_block() { return kNorm ? kSelfRows : kRowsPerBlock; }

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
      extern __shared__ __align__(16) uint8_t smem[];
      const Q8Act sx = carve_xq(smem, n_tok, dim, kQ16);
      norm_quant_rows<kQ16>(nx, n_tok, dim, blockIdx.x == 0, sx);
      x = xq_of(sx);
    }
  }
};

template <typename Block, int QK, int T, bool kQ16, bool kNorm>
__global__ void __launch_bounds__(rows_per_block<kNorm>() * kWarpSize)
matvec_q8_multi_kernel(MultiArgs a, int64_t n_cols, int n_tok, XQ x, NormX nx) {
  constexpr int R = rows_per_block<kNorm>();
  const int i = blockIdx.x >= a.first[1] ? (blockIdx.x >= a.first[2] ? 2 : 1) : 0;
  const int64_t row = (int64_t)(blockIdx.x - a.first[i]) * R + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t n_rows = a.rows[i];
  if (!kNorm && row >= n_rows) return;  // kNorm: every warp takes part in the prologue
  float acc[1][T];
  const uint8_t* rows[1] = {a.w[i] + (row < n_rows ? row : n_rows - 1) * a.stride[i]};
  rows_dots<Block, QK, T, kQ16>(rows, (int)n_cols, n_tok, x, lane, acc, XPrologue<kNorm, kQ16>{x, nx, n_tok, n_cols});
  if (row >= n_rows) return;
  const float* bias = a.bias[i];
#pragma unroll
  for (int t = 0; t < T; ++t) {
    if (t >= n_tok) break;
    if (lane == 0) a.y[i][(int64_t)t * n_rows + row] = bias ? acc[0][t] + bias[row] : acc[0][t];
  }
}

// h = act(x·gateᵀ) ⊙ (x·upᵀ): a warp takes row r of both (elementwise.cu's formulas).
template <typename Block, int QK, int T, bool kQ16, bool kNorm, int kAct>
__global__ void __launch_bounds__(rows_per_block<kNorm>() * kWarpSize)
matvec_q8_gate_up_kernel(const uint8_t* __restrict__ wg, size_t sg, const uint8_t* __restrict__ wu, size_t su,
                         int64_t n_rows, int64_t n_cols, int n_tok, XQ x, NormX nx, float* __restrict__ h) {
  const int64_t row = (int64_t)blockIdx.x * rows_per_block<kNorm>() + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (!kNorm && row >= n_rows) return;  // kNorm: every warp takes part in the prologue
  float acc[2][T];  // gate, up
  const int64_t r = row < n_rows ? row : n_rows - 1;
  const uint8_t* rows[2] = {wg + r * sg, wu + r * su};
  rows_dots<Block, QK, T, kQ16>(rows, (int)n_cols, n_tok, x, lane, acc, XPrologue<kNorm, kQ16>{x, nx, n_tok, n_cols});
  if (row >= n_rows) return;
#pragma unroll
  for (int t = 0; t < T; ++t) {
    if (t >= n_tok) break;
    if (lane != 0) continue;
    const float g = acc[0][t], u = acc[1][t];
    float r;
    if (kAct == 0) {
      r = g / (1.f + expf(-g)) * u;
    } else {
      constexpr float kSqrt2OverPi = 0.79788456080286535588f;
      r = 0.5f * g * (1.f + tanhf(kSqrt2OverPi * g * (1.f + 0.044715f * g * g))) * u;
    }
    h[(int64_t)t * n_rows + row] = r;
  }
}

// norm_quant_row as a launch of its own, one block of norm_threads(dim) per row.
template <bool kQ16>
__global__ void __launch_bounds__(kNormMaxThreads)
norm_quant_kernel(const float* __restrict__ x, const float* __restrict__ w, float eps, int64_t dim,
                  float* __restrict__ xn, Q8Act a) {
  const int64_t row = blockIdx.x;
  norm_quant_row<kQ16>(reinterpret_cast<const float4*>(x + row * dim), reinterpret_cast<const float4*>(w), eps, dim,
                       reinterpret_cast<float4*>(xn + row * dim), token_row(a, row), [] { pdl_begin(); });
}

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


}  // namespace

// Weights are read in loads as wide as their block size allows (2, 4, 8 or 16 bytes) and in 8-
// and 16-byte loads in the group-of-eight layout (matvec_pieces.cuh piece_alignment). Weights are
// uploaded one tensor per allocation, so this holds; a view that breaks it is refused.
void check_q8_alignment(const WeightView& w, const char* what) {
  dispatch_weight(w, [&](auto bt) {
    using B = typename decltype(bt)::block;
    constexpr unsigned align = piece_alignment<B>();
    if (reinterpret_cast<uintptr_t>(w.data) % align || w.row_stride % align)
      throw Error("backend", "invalid_argument",
                  strfmt("cuda %s: %s weights must start on a %u-byte boundary", what, type_name(w.type), align));
  });
}

bool matvec_q8_supported(GGMLType t) {
  return dispatch_block_type(t, [](auto) {});
}

size_t matvec_q8_scratch_bytes(int64_t n_tok, int64_t n_cols) {
  return xq_bytes(n_tok, n_cols, true) + 64;
}

void matvec_q8(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, void* scratch,
               cudaStream_t stream, bool q16, bool accumulate) {
  if (n_tok > kMatvecQ8MaxTokens || w.n_cols % 32)
    throw Error("backend", "invalid_argument",
                strfmt("cuda matvec_q8: %lld tokens of %lld columns", (long long)n_tok, (long long)w.n_cols));
  check_q8_alignment(w, "matvec_q8");
  const XQ xq = xq_of(quantize_q8(x, n_tok, w.n_cols, scratch, stream, q16));
  const unsigned grid = (unsigned)((w.n_rows + kRowsPerBlock - 1) / kRowsPerBlock);
  dispatch_bits(q16, [&](auto bits) { dispatch_tokens(n_tok, [&](auto nt) { dispatch_weight(w, [&](auto bt) {
    using BT = decltype(bt);
    constexpr bool kQ16 = decltype(bits)::value;
    auto run = [&](auto kernel) {
      launch_kernel(kernel, grid, kRowsPerBlock * kWarpSize, 0, stream, static_cast<const uint8_t*>(w.data),
          w.row_stride, w.n_rows, w.n_cols, (int)n_tok, xq, y, bias);
    };
    if (accumulate) run(matvec_q8_kernel<typename BT::block, BT::qk, decltype(nt)::value, kQ16, true>);
    else run(matvec_q8_kernel<typename BT::block, BT::qk, decltype(nt)::value, kQ16, false>);
  }); }); });
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

namespace {
void check_q8(const WeightView& w, int64_t n_tok, int64_t n_cols, const char* what) {
  if (n_tok > kMatvecQ8MaxTokens || n_tok <= 0 || w.n_cols != n_cols || n_cols % 32 || !matvec_q8_supported(w.type))
    throw Error("backend", "invalid_argument",
                strfmt("cuda %s: %lld tokens of %lld columns (weight %lld columns, %s)", what, (long long)n_tok,
                       (long long)n_cols, (long long)w.n_cols, type_name(w.type)));
  check_q8_alignment(w, what);
}
}  // namespace

Q8Act quantize_q8(const float* x, int64_t n_tok, int64_t n_cols, void* scratch, cudaStream_t stream, bool q16) {
  const Q8Act a = q8_act(scratch, n_tok, n_cols, q16);
  const int64_t n_blocks = n_tok * (n_cols / 32);
  const unsigned grid = (unsigned)((n_blocks * kWarpSize + 255) / 256);
  if (q16) launch_kernel(quantize_q8_kernel<true>, grid, 256, 0, stream, x, n_blocks, a);
  else launch_kernel(quantize_q8_kernel<false>, grid, 256, 0, stream, x, n_blocks, a);
  GAACRT_CUDA_CHECK(cudaGetLastError());
  return a;
}

Q8Act q8_act(void* scratch, int64_t n_tok, int64_t n_cols, bool q16) { return carve_xq(scratch, n_tok, n_cols, q16); }

bool norm_quant_q8_aligned(const float* x, const float* norm_w, const float* xn) {
  return aligned16(x) && aligned16(norm_w) && aligned16(xn);  // the int8 scratch is cudaMalloc'd
}

void norm_quant_q8(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim, float* xn, const Q8Act& a,
                   cudaStream_t stream) {
  if (dim % 32 || n_tok != a.n_tok || dim != a.n_cols)
    throw Error("backend", "invalid_argument", strfmt("cuda norm_quant_q8: %lld x %lld", (long long)n_tok, (long long)dim));
  if (!norm_quant_q8_aligned(x, norm_w, xn))
    throw Error("backend", "invalid_argument", "cuda norm_quant_q8: x, the norm weight and xn must be 16-byte aligned");
  if (a.lo)
    launch_kernel(norm_quant_kernel<true>, (unsigned)n_tok, norm_threads(dim), 0, stream, x, norm_w, eps, dim, xn, a);
  else
    launch_kernel(norm_quant_kernel<false>, (unsigned)n_tok, norm_threads(dim), 0, stream, x, norm_w, eps, dim, xn, a);
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

bool matvec_q8_norm_fits(int64_t n_tok, int64_t dim, const NormX& nx) {
  static const bool off = [] {
    const char* e = std::getenv("GAACRT_CUDA_NORM_SELF");  // 0: always norm and quantize x in its own launch
    return e && e[0] == '0';
  }();
  // The block must hold norm_threads(dim) threads (one quad each) for the standalone kernel's bits.
  static_assert(kSelfRows * kWarpSize * 4 == kNormSelfMaxDim, "a matvec block holds dim / 4 threads");
  constexpr size_t kSmemLimit = 48 << 10;  // dynamic shared memory without an opt-in
  return !off && n_tok >= 1 && n_tok <= kMatvecQ8MaxTokens && dim % 32 == 0 && dim <= kNormSelfMaxDim &&
         xq_bytes(n_tok, dim, true) <= kSmemLimit && norm_quant_q8_aligned(nx.x, nx.w, nx.xn);
}

namespace {
// Shared bytes of the kNorm kernels: x quantized (one or two byte planes) and its scales.
size_t norm_smem_bytes(const Q8Act& a) { return xq_bytes(a.n_tok, a.n_cols, a.lo != nullptr); }
}  // namespace

void matvec_q8_multi(const WeightView* w, int n_w, float* const* y, const float* const* bias, const Q8Act& a,
                     cudaStream_t stream, const NormX* norm) {
  if (n_w < 1 || n_w > 3) throw Error("backend", "invalid_argument", strfmt("cuda matvec_q8_multi: %d matrices", n_w));
  bool same = true;
  for (int i = 0; i < n_w; ++i) {
    check_q8(w[i], a.n_tok, a.n_cols, "matvec_q8_multi");
    same = same && w[i].type == w[0].type && w[i].layout == w[0].layout;
  }
  if (norm && (!same || !matvec_q8_norm_fits(a.n_tok, a.n_cols, *norm))) {  // the norm in a launch of its own
    norm_quant_q8(norm->x, norm->w, norm->eps, a.n_tok, a.n_cols, norm->xn, a, stream);
    norm = nullptr;
  }
  if (!same) {  // mixed types: one launch per matrix over the same quantized x
    for (int i = 0; i < n_w; ++i) {
      const unsigned grid = (unsigned)((w[i].n_rows + kRowsPerBlock - 1) / kRowsPerBlock);
      dispatch_bits(a.lo, [&](auto bits) { dispatch_tokens(a.n_tok, [&](auto nt) { dispatch_weight(w[i], [&](auto bt) {
        using BT = decltype(bt);
        launch_kernel(matvec_q8_kernel<typename BT::block, BT::qk, decltype(nt)::value, decltype(bits)::value, false>,
            grid, kRowsPerBlock * kWarpSize, 0, stream, static_cast<const uint8_t*>(w[i].data), w[i].row_stride,
            w[i].n_rows, a.n_cols, (int)a.n_tok, xq_of(a), y[i], bias ? bias[i] : nullptr);
      }); }); });
      GAACRT_CUDA_CHECK(cudaGetLastError());
    }
    return;
  }
  const int R = norm ? kSelfRows : kRowsPerBlock;
  MultiArgs m{};
  m.first[0] = 0;
  for (int i = 0; i < 3; ++i) {
    const bool on = i < n_w;
    m.w[i] = on ? static_cast<const uint8_t*>(w[i].data) : nullptr;
    m.stride[i] = on ? w[i].row_stride : 0;
    m.rows[i] = on ? w[i].n_rows : 0;
    m.y[i] = on ? y[i] : nullptr;
    m.bias[i] = on && bias ? bias[i] : nullptr;
    m.first[i + 1] = m.first[i] + (unsigned)((m.rows[i] + R - 1) / R);
  }
  const NormX nx = norm ? *norm : NormX{};
  const size_t smem = norm ? norm_smem_bytes(a) : 0;
  dispatch_bits(a.lo, [&](auto bits) { dispatch_tokens(a.n_tok, [&](auto nt) { dispatch_weight(w[0], [&](auto bt) {
    using BT = decltype(bt);
    constexpr int T = decltype(nt)::value;
    constexpr bool kQ16 = decltype(bits)::value;
    auto run = [&](auto kernel) {
      launch_kernel(kernel, m.first[3], R * kWarpSize, smem, stream, m, a.n_cols, (int)a.n_tok, xq_of(a), nx);
    };
    if (norm) run(matvec_q8_multi_kernel<typename BT::block, BT::qk, T, kQ16, true>);
    else run(matvec_q8_multi_kernel<typename BT::block, BT::qk, T, kQ16, false>);
  }); }); });
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

bool matvec_q8_gate_up(const WeightView& gate, const WeightView& up, Activation act, float* h, const Q8Act& a,
                       cudaStream_t stream, const NormX* norm) {
  if (gate.type != up.type || gate.layout != up.layout || gate.n_rows != up.n_rows ||
      (act != Activation::SiLU && act != Activation::GeluTanh))
    return false;
  check_q8(gate, a.n_tok, a.n_cols, "matvec_q8_gate_up");
  check_q8(up, a.n_tok, a.n_cols, "matvec_q8_gate_up");
  if (norm && !matvec_q8_norm_fits(a.n_tok, a.n_cols, *norm))
    throw Error("backend", "invalid_argument", "cuda matvec_q8_gate_up: the norm cannot run in every thread block here");
  const int R = norm ? kSelfRows : kRowsPerBlock;
  const unsigned grid = (unsigned)((gate.n_rows + R - 1) / R);
  const NormX nx = norm ? *norm : NormX{};
  const size_t smem = norm ? norm_smem_bytes(a) : 0;
  dispatch_bits(a.lo, [&](auto bits) { dispatch_tokens(a.n_tok, [&](auto nt) { dispatch_weight(gate, [&](auto bt) {
    using BT = decltype(bt);
    constexpr int T = decltype(nt)::value;
    constexpr bool kQ16 = decltype(bits)::value;
    const auto* g = static_cast<const uint8_t*>(gate.data);
    const auto* u = static_cast<const uint8_t*>(up.data);
    auto run = [&](auto kernel) {
      launch_kernel(kernel, grid, R * kWarpSize, smem, stream, g, gate.row_stride, u, up.row_stride, gate.n_rows,
                    a.n_cols, (int)a.n_tok, xq_of(a), nx, h);
    };
    if (norm) {
      if (act == Activation::SiLU) run(matvec_q8_gate_up_kernel<typename BT::block, BT::qk, T, kQ16, true, 0>);
      else run(matvec_q8_gate_up_kernel<typename BT::block, BT::qk, T, kQ16, true, 1>);
    } else {
      if (act == Activation::SiLU) run(matvec_q8_gate_up_kernel<typename BT::block, BT::qk, T, kQ16, false, 0>);
      else run(matvec_q8_gate_up_kernel<typename BT::block, BT::qk, T, kQ16, false, 1>);
    }
  }); }); });
  GAACRT_CUDA_CHECK(cudaGetLastError());
  return true;
}

bool matvec_q8_self(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias,
                    cudaStream_t stream, bool q16, bool accumulate) {
  static const bool off = [] {
    const char* e = std::getenv("GAACRT_CUDA_MATVEC_SELF");  // 0: always quantize x in its own launch
    return e && e[0] == '0';
  }();
  const size_t smem = xq_bytes(n_tok, w.n_cols, q16);
  if (off || n_tok * w.n_cols > kMatvecQ8SelfMaxValues || w.n_rows > kMatvecQ8SelfMaxRows ||
      n_tok > kMatvecQ8MaxTokens || w.n_cols % 32)
    return false;
  check_q8_alignment(w, "matvec_q8_self");
  const unsigned grid = (unsigned)((w.n_rows + kSelfRows - 1) / kSelfRows);
  dispatch_bits(q16, [&](auto bits) { dispatch_tokens(n_tok, [&](auto nt) { dispatch_weight(w, [&](auto bt) {
    using BT = decltype(bt);
    constexpr int T = decltype(nt)::value;
    constexpr bool kQ16 = decltype(bits)::value;
    auto run = [&](auto kernel) {
      launch_kernel(kernel, grid, kSelfRows * kWarpSize, smem, stream, static_cast<const uint8_t*>(w.data),
                    w.row_stride, w.n_rows, w.n_cols, (int)n_tok, x, y, bias);
    };
    if (accumulate) run(matvec_q8_self_kernel<typename BT::block, BT::qk, T, kQ16, true>);
    else run(matvec_q8_self_kernel<typename BT::block, BT::qk, T, kQ16, false>);
  }); }); });
  GAACRT_CUDA_CHECK(cudaGetLastError());
  return true;
}

}  // namespace gaacrt::cuda
