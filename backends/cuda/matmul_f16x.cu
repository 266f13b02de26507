// matmul_f16x.cu — prefill-sized y(n_tok, n_rows) = x · wᵀ of quantized weights on fp16 tensor
// cores with exact weights: the default prefill matmul.
//
// The weights' integer codes q (int8 after the pieces of matvec_pieces.cuh unpack them: Q4_0's
// q - 8, IQ4's code values, Q6_K's q - 32...) are exact in fp16, and x is carried as two fp16
// parts (x / s = hi + lo, |x / s - hi - lo| <= 2^-22 |x / s|; s a power of two per token, 1 unless
// x nears fp16's range). Per 32-column slice, mma.sync m16n8k16 sums q·hi + q·lo into a fresh fp32
// tile, which one FFMA scales by the weight scale into the accumulator (two for Q6_K's 16-column
// scales), plus the min term m · Σ(x / s) of Q4_1 / Q5_1 / K-quants:
//
//   y[r][t] = s[t] · ( Σ_slices dw[r][sl] · Σ_{k in sl} q[r][k] · (hi + lo)[t][k]  +  Σ_32-blocks mw[r][b] · sx[t][b] )
//
// About fp32-exact (the bf16 hi/lo kernel's precision) at a third of the int8 kernels' per-slice
// instructions: their exact integer sums need x's scale per 32 columns too, and a 16-bit x two mma
// and three conversions (matmul_q8mma.cu). The tile layout and the weight unpacking are those of
// matmul_q8mma.cu: 64 weight rows x 64 tokens per thread block, 256 columns a step, 8 warps (2 of
// 32 rows x 4 of 16 tokens); x's tiles arrive by cp.async.
#include "matmul_f16x.cuh"

#include <type_traits>

#include "block_traits.cuh"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "kernels/attention_ptx.cuh"
#include "kernels/matvec_pieces.cuh"
#include "matvec_q8.cuh"

namespace gaacrt::cuda {
namespace {

constexpr int kRowsT = 64, kToksT = 64, kKc = 256, kThreads = 256;
constexpr int kRowH = kKc + 8;  // halves per shared row: 16 spare bytes keep ldmatrix conflict-free
constexpr int kSl = kKc / 32;   // 32-column slices per step
constexpr float kXMax = 16384.f;  // each token's x is scaled by a power of two to an amax near this

template <bool kMin>
struct alignas(16) Tile {
  uint16_t w[kRowsT][kRowH];   // weight codes q as fp16
  uint16_t xh[kToksT][kRowH];  // x / s, high fp16 part
  uint16_t xl[kToksT][kRowH];  // and the rest
  // A slice's lanes read 8 rows (or 4 tokens) of one column: one spare float per row keeps them
  // on distinct banks.
  float dw[kRowsT][kKc / 16 + 1];          // weight scale per 16 columns
  float mw[kMin ? kRowsT : 1][kSl + 1];    // min term per 32 columns
  float sx[kMin ? kToksT : 1][kSl + 1];    // Σ x / s per 32 columns
};

__device__ __forceinline__ void mma_f16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float2 unpack_f16x2(uint32_t h) {
  float lo, hi;
  asm("{.reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;}" : "=f"(lo), "=f"(hi) : "r"(h));
  return make_float2(lo, hi);
}

// Four int8 (one word) to four fp16, exactly: each biased byte u = q + 128 goes under the fp16
// exponent of 1024 (0x64uu = 1024 + u, by prmt), then 1152 is subtracted (0x6480).
__device__ __forceinline__ uint2 int8x4_to_f16(uint32_t w) {
  const uint32_t u = w ^ 0x80808080u, k = 0x64806480u;
  uint32_t a = __byte_perm(u, 0x64646464u, 0x4140u), b = __byte_perm(u, 0x64646464u, 0x4342u);
  asm("sub.f16x2 %0, %0, %1;" : "+r"(a) : "r"(k));
  asm("sub.f16x2 %0, %0, %1;" : "+r"(b) : "r"(k));
  return make_uint2(a, b);
}

// x(n_tok, n_cols) -> hi, lo (fp16), sx = Σ per 32 columns of x / s (fp32), s per token. One
// thread block per token; a thread takes quads (float4), 8 lanes a 32-block (3 shuffles).
__global__ void __launch_bounds__(256) split_x_kernel(const float* __restrict__ x, int64_t n_cols,
                                                      uint16_t* __restrict__ hi, uint16_t* __restrict__ lo,
                                                      float* __restrict__ sx, float* __restrict__ s) {
  pdl_begin();
  __shared__ float red[8];
  const int64_t t = blockIdx.x;
  const float4* xr = reinterpret_cast<const float4*>(x + t * n_cols);
  const int n4 = (int)(n_cols / 4);
  float amax = 0.f;
  for (int i = threadIdx.x; i < n4; i += blockDim.x) {
    const float4 v = xr[i];
    amax = fmaxf(amax, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
  }
  amax = warp_max_f32(amax);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = amax;
  __syncthreads();
  amax = red[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); ++w) amax = fmaxf(amax, red[w]);
  // s = 2^e brings amax into (kXMax / 2, kXMax]: near fp16's top (no overflow), far from its
  // subnormals, so every token keeps 22 bits relative to its largest value.
  int e = 0;
  if (amax > 0.f && amax <= 3.0e38f) frexpf(amax / kXMax, &e);
  e = max(e, -100);
  const float inv = ldexpf(1.f, -e);
  if (threadIdx.x == 0) s[t] = ldexpf(1.f, e);
  uint2* h2 = reinterpret_cast<uint2*>(hi + t * n_cols);
  uint2* l2 = reinterpret_cast<uint2*>(lo + t * n_cols);
  // blockDim.x (256) is a multiple of 8, so a 32-block's 8 quads are 8 consecutive lanes of one
  // pass; every lane of a warp takes part in the shuffles (n4 is a multiple of 8).
  for (int i0 = 0; i0 < n4; i0 += blockDim.x) {
    const int i = i0 + threadIdx.x;
    const bool in = i < n4;
    const float4 v = in ? xr[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    const float a0 = v.x * inv, a1 = v.y * inv, a2 = v.z * inv, a3 = v.w * inv;
    const uint32_t p01 = pack_f16x2(a0, a1), p23 = pack_f16x2(a2, a3);
    const float2 r01 = unpack_f16x2(p01), r23 = unpack_f16x2(p23);
    float sum = (a0 + a1) + (a2 + a3);
    for (int o = 4; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (!in) continue;
    h2[i] = make_uint2(p01, p23);
    l2[i] = make_uint2(pack_f16x2(a0 - r01.x, a1 - r01.y), pack_f16x2(a2 - r23.x, a3 - r23.y));
    if (i % 8 == 0) sx[t * (n_cols / 32) + i / 8] = sum;
  }
}

template <typename Block, int QK>
__global__ void __launch_bounds__(kThreads, 2)
    matmul_f16x_kernel(const uint8_t* __restrict__ w, size_t row_stride, int64_t n_rows, int64_t n_cols,
                       const uint16_t* __restrict__ xh, const uint16_t* __restrict__ xl,
                       const float* __restrict__ xsum, const float* __restrict__ xs, int64_t n_tok,
                       float* __restrict__ y, const float* __restrict__ bias) {
  using P = Piece<Block>;
  constexpr bool kMin = P::kMin;
  constexpr bool k16 = std::is_same_v<Block, block_q6_k>;  // a scale per 16 columns
  constexpr int L = P::kLanes, kBpc = kKc / QK;
  static_assert(kKc % QK == 0, "a step holds whole blocks");
  constexpr int kWT = kRowsT * kBpc * L / kThreads;       // weight pieces per thread per step
  constexpr int kXC = 2 * kToksT * (kKc / 8) / kThreads;  // 16-byte chunks of x (both parts)
  constexpr int kST = kToksT * kSl / kThreads;            // Σx values
  static_assert(kWT * kThreads == kRowsT * kBpc * L && kXC * kThreads == 2 * kToksT * (kKc / 8) &&
                kST * kThreads == kToksT * kSl, "whole tasks per thread");
  pdl_begin();
  extern __shared__ __align__(16) uint8_t smem[];
  Tile<kMin>& T = *reinterpret_cast<Tile<kMin>*>(smem);
  const int64_t row0 = (int64_t)blockIdx.x * kRowsT, tok0 = (int64_t)blockIdx.y * kToksT;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
  const int wr = warp & 1, wt = warp >> 1;  // this warp's rows 32 wr.., tokens 16 wt..
  const int mi = lane >> 3, ri = lane & 7;  // ldmatrix: this lane's matrix and row
  const int64_t n_blocks = n_cols / QK, n_sub = n_cols / 32;
  float acc[2][2][4] = {};  // [m-tile of 16 rows][n-tile of 8 tokens][fragment]

  for (int64_t c0 = 0; c0 < n_cols; c0 += kKc) {
    // x: both parts by cp.async (zeros past the end), in flight while the weights unpack. (Fully
    // unrolled, the 16 copies' addresses took 50 more registers than the rest of the kernel.)
#pragma unroll 2
    for (int i = 0; i < kXC; ++i) {
      const int t = threadIdx.x + i * kThreads, part = t / (kToksT * (kKc / 8)), u = t % (kToksT * (kKc / 8));
      const int tk = u / (kKc / 8), c = (u % (kKc / 8)) * 8;
      const bool in = tok0 + tk < n_tok && c0 + c < n_cols;  // n_cols % 32 == 0: whole chunks
      const uint16_t* src = part ? xl : xh;
      attn::cp_async16(part ? &T.xl[tk][c] : &T.xh[tk][c], in ? src + (tok0 + tk) * n_cols + c0 + c : src,
                       in ? 16u : 0u);
    }
    attn::cp_async_commit();
    typename P::Raw raw[kWT];
#pragma unroll
    for (int i = 0; i < kWT; ++i) {  // past the matrix a zero piece (scale 0, min 0)
      const int t = threadIdx.x + i * kThreads, r = t / (kBpc * L), bi = (t / L) % kBpc, k = t % L;
      const int64_t row = row0 + r, b = c0 / QK + bi;
      raw[i] = typename P::Raw{};
      if (row < n_rows && b < n_blocks) raw[i] = P::load(w + row * row_stride + b * sizeof(Block), k);
    }
#pragma unroll
    for (int i = 0; i < kWT; ++i) {
      const int t = threadIdx.x + i * kThreads, r = t / (kBpc * L), bi = (t / L) % kBpc, k = t % L;
      const PieceVals<P::G, P::W> v = P::unpack(raw[i], k);
#pragma unroll
      for (int gi = 0; gi < P::G; ++gi)
#pragma unroll
        for (int j = 0; j < P::W; ++j) {
          const int c = bi * QK + v.col[gi] + P::off(j);
          *reinterpret_cast<uint2*>(&T.w[r][c]) = int8x4_to_f16(v.w[gi][j]);
          T.dw[r][c / 16] = v.d[gi];  // every word of a 16-column slot carries the same scale
          if constexpr (kMin) T.mw[r][c / 32] = v.mv[gi];  // and of a 32-column block the same min
        }
    }
    if constexpr (kMin) {
#pragma unroll
      for (int i = 0; i < kST; ++i) {
        const int t = threadIdx.x + i * kThreads, tk = t / kSl, sl = t % kSl;
        const int64_t b = c0 / 32 + sl;
        T.sx[tk][sl] = tok0 + tk < n_tok && b < n_sub ? xsum[(tok0 + tk) * n_sub + b] : 0.f;
      }
    }
    attn::cp_async_wait<0>();
    __syncthreads();
#pragma unroll 1
    for (int s = 0; s < kSl; ++s) {
      const int kk = 32 * s;
      float sxv[2][2];  // [n-tile][token 2 tig + j]
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int j = 0; j < 2; ++j) sxv[nt][j] = kMin ? T.sx[16 * wt + 8 * nt + 2 * tig + j][s] : 0.f;
      // p: the slice's q·hi + q·lo per (m-tile, n-tile), its two 16-column halves in turn; a k16
      // type scales each half by its own scale, the others the sum of both.
      float p[2][2][4] = {};
#pragma unroll
      for (int ks = 0; ks < 2; ++ks) {
        uint32_t bh[4], bl[4];
        attn::ldmatrix_x4(bh, &T.xh[16 * wt + 8 * (mi >> 1) + ri][kk + 16 * ks + 8 * (mi & 1)]);
        attn::ldmatrix_x4(bl, &T.xl[16 * wt + 8 * (mi >> 1) + ri][kk + 16 * ks + 8 * (mi & 1)]);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          uint32_t af[4];
          attn::ldmatrix_x4(af, &T.w[32 * wr + 16 * mt + 8 * (mi & 1) + ri][kk + 16 * ks + 8 * (mi >> 1)]);
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            mma_f16(p[mt][nt], af, bh[2 * nt], bh[2 * nt + 1]);
            mma_f16(p[mt][nt], af, bl[2 * nt], bl[2 * nt + 1]);
          }
        }
        if (!k16 && ks == 0) continue;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          float dw[2], mwv[2];  // rows g, g + 8 of the m-tile
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = 32 * wr + 16 * mt + g + 8 * h;
            dw[h] = T.dw[r][k16 ? 2 * s + ks : 2 * s];
            mwv[h] = kMin ? T.mw[r][s] : 0.f;
          }
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {  // fragment e: row g + 8 (e / 2), token 2 tig + e % 2
              const int h = e >> 1, j = e & 1;
              acc[mt][nt][e] = fmaf(p[mt][nt][e], dw[h], acc[mt][nt][e]);
              if (kMin && ks == 1) acc[mt][nt][e] = fmaf(mwv[h], sxv[nt][j], acc[mt][nt][e]);
              p[mt][nt][e] = 0.f;
            }
        }
      }
    }
    __syncthreads();
  }
  // C: lane holds rows g and g + 8 of each m-tile, tokens 2 tig and 2 tig + 1 of each n-tile.
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t tok = tok0 + 16 * wt + 8 * nt + 2 * tig + j;
      if (tok >= n_tok) continue;
      const float f = xs[tok];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t row = row0 + 32 * wr + 16 * mt + g + 8 * h;
          if (row >= n_rows) continue;
          const float v = acc[mt][nt][2 * h + j] * f;
          y[tok * n_rows + row] = bias ? v + bias[row] : v;
        }
    }
}

template <typename Block, int QK>
void launch(const WeightView& w, const uint16_t* xh, const uint16_t* xl, const float* xsum, const float* xs,
            int64_t n_tok, float* y, const float* bias, cudaStream_t stream) {
  constexpr auto kernel = matmul_f16x_kernel<Block, QK>;
  constexpr size_t smem = sizeof(Tile<Piece<Block>::kMin>);
  allow_dynamic_smem<kernel>(smem);
  const dim3 grid((unsigned)((w.n_rows + kRowsT - 1) / kRowsT), (unsigned)((n_tok + kToksT - 1) / kToksT));
  launch_kernel(kernel, grid, kThreads, smem, stream, static_cast<const uint8_t*>(w.data), w.row_stride, w.n_rows,
                w.n_cols, xh, xl, xsum, xs, n_tok, y, bias);
}

}  // namespace

size_t matmul_f16x_scratch_bytes(int64_t n_tok, int64_t n_cols) {
  return 2 * sizeof(uint16_t) * (size_t)n_tok * n_cols + sizeof(float) * (size_t)n_tok * (n_cols / 32 + 1) + 64;
}

bool matmul_f16x(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, void* scratch,
                 cudaStream_t stream) {
  if (w.n_cols % 32 != 0 || n_tok > 65535LL * kToksT || !matvec_q8_supported(w.type) ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0)
    return false;
  check_q8_alignment(w, "matmul_f16x");
  // scratch: hi, lo (16-byte aligned: n_cols % 32 == 0), Σx per 32 columns, s per token
  auto* hi = static_cast<uint16_t*>(scratch);
  uint16_t* lo = hi + n_tok * w.n_cols;
  auto* xsum = reinterpret_cast<float*>(lo + n_tok * w.n_cols);
  float* xs = xsum + n_tok * (w.n_cols / 32);
  launch_kernel(split_x_kernel, (unsigned)n_tok, 256, 0, stream, x, w.n_cols, hi, lo, xsum, xs);
  GAACRT_CUDA_CHECK(cudaGetLastError());
  return dispatch_block_type(w.type, [&](auto bt) {
    using BT = decltype(bt);
    launch<typename BT::block, BT::qk>(w, hi, lo, xsum, xs, n_tok, y, bias, stream);
  });
}

}  // namespace gaacrt::cuda
