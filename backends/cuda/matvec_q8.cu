// matvec_q8.cu — decode-sized matmul: activations quantized per 32 values (scale d_x and d_x·Σq
// kept in fp32), weights unpacked to int8x4 words and dotted with dp4a.
//
// Two activation precisions, the CPU backend's two (BackendParams::act_bits): 16 bits, the
// default (q = round(x / d), d = amax / 32767: backends/cpu/quantize_act.cpp quantize_row_q16, the
// same bits), stored as a signed high byte h and an unsigned low byte l (q = 256 h + l) and dotted
// as 256 · dp4a(w, h) + dp4a(w, l), exact in int32; or 8 bits (d = amax / 127), llama.cpp's
// precision and the CPU's Q8_0 / Q8_1 integers and fp16 scales (kernels/quantize_act.cuh), one
// dp4a. On real weights the 8-bit rounding moves the logits far more than the test bound of GPU
// vs CPU (SmolLM2-135M: relative L2 up to 0.13 between the CPU's own 8- and 16-bit runs), so the
// GPU follows the CPU's setting.
//
// Every supported weight type is brought to one form per group of values inside a 32-block of x:
//     w_i = d_g · q_i + m     (q_i int8; d_g the group's scale, so Q6_K's per-16 scales fit)
// so  Σ w_i x_i ≈ d_x · d_g · Σ q_i xq_i + m · (d_x Σ xq_i),
// the same algebra the CPU's vec_dot kernels use (Q4_0's -8 is inside q_i, or taken off per block
// as 8·Σxq in the regrouped layout; Q4_1/K-quants' mins go through m). One warp per output row (two
// rows per warp for one token: x read once for both); lanes share blocks so each load is
// contiguous across the warp (kernels/matvec_pieces.cuh); up to 8 tokens at once, so a weight row
// is read once for all. The pieces every kernel here is built of are in kernels/matvec_rows.cuh;
// the Q/K/V launch is in matvec_q8_multi.cu, gate/up in kernels/matvec_gate_up.cuh (files of
// their own so the build compiles them in parallel).
#include <cstdlib>
#include <type_traits>

#include "block_traits.cuh"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "kernels/matvec_rows.cuh"
#include "matvec_q8.cuh"

namespace gaacrt::cuda {
using namespace matvec;
namespace {

// One warp per R rows (rows R·w .. R·w + R - 1). R = 2 reads each x value once for two rows, so
// a warp's x loads per weight byte halve and twice the weight loads are in flight per lane. Each
// row's sum is taken in the same order for every R: the same bits.
template <typename Block, int QK, int T, bool kQ16, bool kAccumulate, int R>
__global__ void __launch_bounds__(kRowsPerBlock * kWarpSize)
matvec_q8_kernel(const uint8_t* __restrict__ w, size_t row_stride, int64_t n_rows, int64_t n_cols, int n_tok,
                 XQ x, float* __restrict__ y, const float* __restrict__ bias) {
  const int64_t row0 = ((int64_t)blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize) * R;
  const int lane = threadIdx.x % kWarpSize;
  if (row0 >= n_rows) return;
  float acc[R][T];
  const uint8_t* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = w + min(row0 + r, n_rows - 1) * row_stride;  // past the end: unused
  rows_dots<Block, QK, T, kQ16>(rows, (int)n_cols, n_tok, x, lane, acc, WaitForX{});
  if (lane != 0) return;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = row0 + r;
    if (row >= n_rows) break;
#pragma unroll
    for (int t = 0; t < T; ++t) {
      if (t >= n_tok) break;
      const float v = bias ? acc[r][t] + bias[row] : acc[r][t];
      if (kAccumulate) y[(int64_t)t * n_rows + row] += v;  // what add_kernel does with the stored v
      else y[(int64_t)t * n_rows + row] = v;
    }
  }
}

// Decode matmul in one launch: every thread block quantizes x itself into shared memory (the
// same arithmetic as quantize_q8_kernel), then its warps take one row each. Eight warps, each
// loading its share of x (up to kSelfUnroll blocks of 32) before quantizing any of it; the
// quantization is rows_dots' prologue, so the weights' first loads are already in flight.
constexpr int kSelfUnroll = 4;
template <typename Block, int QK, int T, bool kQ16, bool kAccumulate>
__global__ void __launch_bounds__(kSelfRows * kWarpSize)
matvec_q8_self_kernel(const uint8_t* __restrict__ w, size_t row_stride, int64_t n_rows, int64_t n_cols, int n_tok,
                      const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ bias) {
  GAACRT_DYNAMIC_SMEM(smem);
  const int64_t n_blocks = n_tok * (n_cols / 32);
  const Q8Act sx = q8_act(smem, n_tok, n_cols, kQ16);
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

// norm_quant_row as a launch of its own, one block of norm_threads(dim) per row.
template <bool kQ16>
__global__ void __launch_bounds__(kNormMaxThreads)
norm_quant_kernel(const float* __restrict__ x, const float* __restrict__ w, float eps, int64_t dim,
                  float* __restrict__ xn, Q8Act a) {
  const int64_t row = blockIdx.x;
  norm_quant_row<kQ16>(reinterpret_cast<const float4*>(x + row * dim), reinterpret_cast<const float4*>(w), eps, dim,
                       reinterpret_cast<float4*>(xn + row * dim), token_row(a, row), [] { pdl_begin(); });
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

namespace {
// matvec_q8_kernel over w's rows and the quantized a (checked by the caller).
void launch_matvec_q8(const WeightView& w, const Q8Act& a, float* y, const float* bias, cudaStream_t stream,
                      bool accumulate) {
  // Two rows per warp for one token (H200, 8B shape, 16-bit x: the Q6_K LM head 189 -> 142 µs, o/down
  // 9.98 -> 9.6 µs, tg128 at depth 0 +4%); more tokens keep one row (their accumulators already take
  // the registers). GAACRT_CUDA_MATVEC_ROWS=1 (read per call: the tests flip it) asks one row.
  const char* e = std::getenv("GAACRT_CUDA_MATVEC_ROWS");
  const bool two_rows = a.n_tok == 1 && !(e && e[0] == '1');
  dispatch_q8(w, a, [&](auto bt, auto nt, auto bits) {
    using BT = decltype(bt);
    constexpr int T = decltype(nt)::value;
    constexpr bool kQ16 = decltype(bits)::value;
    auto run = [&](auto rows_per_warp) {  // std::integral_constant: R of matvec_q8_kernel
      constexpr int R = decltype(rows_per_warp)::value;
      const unsigned grid = (unsigned)((w.n_rows + kRowsPerBlock * R - 1) / (kRowsPerBlock * R));
      auto kernel = accumulate ? matvec_q8_kernel<typename BT::block, BT::qk, T, kQ16, true, R>
                               : matvec_q8_kernel<typename BT::block, BT::qk, T, kQ16, false, R>;
      launch_kernel(kernel, grid, kRowsPerBlock * kWarpSize, 0, stream, static_cast<const uint8_t*>(w.data),
          w.row_stride, w.n_rows, w.n_cols, (int)a.n_tok, xq_of(a), y, bias);
    };
    if constexpr (T == 1)
      if (two_rows) return run(std::integral_constant<int, 2>{});
    run(std::integral_constant<int, 1>{});
  });
  GAACRT_CUDA_CHECK(cudaGetLastError());
}
}  // namespace

void matvec_q8(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, void* scratch,
               cudaStream_t stream, bool q16, bool accumulate) {
  check_q8(w, n_tok, w.n_cols, "matvec_q8");  // before the quantize launch
  launch_matvec_q8(w, quantize_q8(x, n_tok, w.n_cols, scratch, stream, q16), y, bias, stream, accumulate);
}

void matvec_q8_quantized(const WeightView& w, const Q8Act& a, float* y, const float* bias, cudaStream_t stream,
                         bool accumulate) {
  check_q8(w, a.n_tok, a.n_cols, "matvec_q8_quantized");
  launch_matvec_q8(w, a, y, bias, stream, accumulate);
}

void matvec::check_q8(const WeightView& w, int64_t n_tok, int64_t n_cols, const char* what) {
  if (n_tok > kMatvecQ8MaxTokens || n_tok <= 0 || w.n_cols != n_cols || n_cols % 32 || !matvec_q8_supported(w.type))
    throw Error("backend", "invalid_argument",
                strfmt("cuda %s: %lld tokens of %lld columns (weight %lld columns, %s)", what, (long long)n_tok,
                       (long long)n_cols, (long long)w.n_cols, type_name(w.type)));
  check_q8_alignment(w, what);
}

Q8Act quantize_q8(const float* x, int64_t n_tok, int64_t n_cols, void* scratch, cudaStream_t stream, bool q16) {
  const Q8Act a = q8_act(scratch, n_tok, n_cols, q16);
  const int64_t n_blocks = n_tok * (n_cols / 32);
  const unsigned grid = (unsigned)((n_blocks * kWarpSize + 255) / 256);
  if (q16) launch_kernel(quantize_q8_kernel<true>, grid, 256, 0, stream, x, n_blocks, a);
  else launch_kernel(quantize_q8_kernel<false>, grid, 256, 0, stream, x, n_blocks, a);
  GAACRT_CUDA_CHECK(cudaGetLastError());
  return a;
}


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
