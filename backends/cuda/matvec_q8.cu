// matvec_q8.cu — decode-sized matmul: activations quantized to int8 per 32 values (scale d_x and
// d_x·Σq kept in fp32), weights unpacked per 32-value sub-block to int8 and dotted with __dp4a.
//
// Every supported weight type is brought to one form per sub-block of 32:
//     w_i = d_h · q_i + m     (q_i int8; h = i / 16, so Q6_K's per-16 scales fit; m = offset)
// so  Σ w_i x_i ≈ d_x (d_0 Σ_{i<16} q_i xq_i + d_1 Σ_{i≥16} q_i xq_i) + m · (d_x Σ xq_i),
// the same algebra the CPU's vec_dot kernels use (Q4_0's -8 is inside q_i; Q4_1/K-quants' mins go
// through m). One warp per output row, lanes striding over sub-blocks, up to 8 tokens at once
// so a weight row is read once for all of them.
#include "block_traits.cuh"
#include "common/half.h"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "matvec_q8.cuh"
#include "quant/dequant.h"

namespace gaacrt::cuda {
namespace {

struct Sub32 {
  int8_t q[32];
  float d0, d1, m;
};

__device__ __forceinline__ void nib32(const uint8_t* qs, int8_t* q, int off) {  // Q4_0 nibble order
  for (int j = 0; j < 16; ++j) {
    q[j] = (int8_t)((qs[j] & 0xF) - off);
    q[j + 16] = (int8_t)((qs[j] >> 4) - off);
  }
}

__device__ void unpack(const block_q4_0& b, int, Sub32& s) {
  nib32(b.qs, s.q, 8);
  s.d0 = s.d1 = fp16_to_f32(b.d);
  s.m = 0.f;
}
__device__ void unpack(const block_q4_1& b, int, Sub32& s) {
  nib32(b.qs, s.q, 0);
  s.d0 = s.d1 = fp16_to_f32(b.d);
  s.m = fp16_to_f32(b.m);
}
__device__ void q5_32(const uint8_t* qs, const uint8_t* qhp, int8_t* q, int off) {
  const uint32_t qh = load_u32_le(qhp);
  for (int j = 0; j < 16; ++j) {
    q[j] = (int8_t)(((qs[j] & 0xF) | (((qh >> j) & 1u) << 4)) - off);
    q[j + 16] = (int8_t)(((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - off);
  }
}
__device__ void unpack(const block_q5_0& b, int, Sub32& s) {
  q5_32(b.qs, b.qh, s.q, 16);
  s.d0 = s.d1 = fp16_to_f32(b.d);
  s.m = 0.f;
}
__device__ void unpack(const block_q5_1& b, int, Sub32& s) {
  q5_32(b.qs, b.qh, s.q, 0);
  s.d0 = s.d1 = fp16_to_f32(b.d);
  s.m = fp16_to_f32(b.m);
}
__device__ void unpack(const block_q8_0& b, int, Sub32& s) {
  for (int j = 0; j < 32; ++j) s.q[j] = b.qs[j];
  s.d0 = s.d1 = fp16_to_f32(b.d);
  s.m = 0.f;
}
__device__ void unpack(const block_iq4_nl& b, int, Sub32& s) {
  for (int j = 0; j < 16; ++j) {
    s.q[j] = (int8_t)kvalues_iq4nl(b.qs[j] & 0xF);
    s.q[j + 16] = (int8_t)kvalues_iq4nl(b.qs[j] >> 4);
  }
  s.d0 = s.d1 = fp16_to_f32(b.d);
  s.m = 0.f;
}
// K-quants: sub-block sb (0..7) of 32; 64-element chunk c = sb/2 holds sb even in low nibbles.
__device__ void unpack(const block_q4_k& b, int sb, Sub32& s) {
  uint8_t sc, mn;
  get_scale_min_k4(sb, b.scales, sc, mn);
  const uint8_t* q = b.qs + 32 * (sb / 2);
  const int sh = 4 * (sb % 2);
  for (int l = 0; l < 32; ++l) s.q[l] = (int8_t)((q[l] >> sh) & 0xF);
  s.d0 = s.d1 = fp16_to_f32(b.d) * (float)sc;
  s.m = -fp16_to_f32(b.dmin) * (float)mn;
}
__device__ void unpack(const block_q5_k& b, int sb, Sub32& s) {
  uint8_t sc, mn;
  get_scale_min_k4(sb, b.scales, sc, mn);
  const uint8_t* q = b.qs + 32 * (sb / 2);
  const int sh = 4 * (sb % 2);
  for (int l = 0; l < 32; ++l) s.q[l] = (int8_t)(((q[l] >> sh) & 0xF) | (((b.qh[l] >> sb) & 1) << 4));
  s.d0 = s.d1 = fp16_to_f32(b.d) * (float)sc;
  s.m = -fp16_to_f32(b.dmin) * (float)mn;
}
__device__ void unpack(const block_q6_k& b, int sb, Sub32& s) {
  // Elements 32*sb .. +31: half n = sb/4 of 128, quarter r = sb%4 (dequant_block's q0..q3).
  const int n = sb / 4, r = sb % 4;
  const uint8_t* L = b.ql + 64 * n + (r % 2) * 32;
  const uint8_t* H = b.qh + 32 * n;
  const int lsh = 4 * (r / 2), hsh = 2 * r;
  for (int l = 0; l < 32; ++l) s.q[l] = (int8_t)((((L[l] >> lsh) & 0xF) | (((H[l] >> hsh) & 3) << 4)) - 32);
  const float d = fp16_to_f32(b.d);
  s.d0 = d * (float)b.scales[2 * sb];
  s.d1 = d * (float)b.scales[2 * sb + 1];
  s.m = 0.f;
}
__device__ void unpack(const block_iq4_xs& b, int sb, Sub32& s) {
  const uint8_t* q = b.qs + 16 * sb;
  for (int j = 0; j < 16; ++j) {
    s.q[j] = (int8_t)kvalues_iq4nl(q[j] & 0xF);
    s.q[j + 16] = (int8_t)kvalues_iq4nl(q[j] >> 4);
  }
  s.d0 = s.d1 = fp16_to_f32(b.d) * (float)iq4_xs_scale(b, sb);
  s.m = 0.f;
}

// x(n_tok, n_cols) -> int8 xq, per 32 values: xd = amax / 127, xs = xd · Σ q. One warp per 32.
__global__ void quantize_q8_kernel(const float* __restrict__ x, int64_t n_blocks, int8_t* __restrict__ xq,
                                   float* __restrict__ xd, float* __restrict__ xs) {
  pdl_begin();
  const int64_t blk = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (blk >= n_blocks) return;  // warp-uniform
  const float v = x[blk * 32 + lane];
  float amax = fabsf(v);
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float d = amax / 127.f;
  const int q = d > 0.f ? __float2int_rn(v / d) : 0;
  xq[blk * 32 + lane] = (int8_t)q;
  int sum = q;
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) {
    xd[blk] = d;
    xs[blk] = d * (float)sum;
  }
}

constexpr int kRowsPerBlock = 4;

// One warp's dot products of one weight row with n_tok quantized activations (xq, xd, xs in
// global or shared memory), reduced over the warp: the same order in every kernel below, so they
// all give the same bits as matvec_q8_kernel.
template <typename Block, int QK>
__device__ __forceinline__ void row_dots(const Block* __restrict__ blocks, int64_t n_cols, int n_tok,
                                         const int8_t* xq, const float* xd, const float* xs, int lane,
                                         float (&acc)[kMatvecQ8MaxTokens]) {
  constexpr int kSubs = QK / 32;
  const int64_t n_sub = n_cols / 32;
#pragma unroll
  for (int t = 0; t < kMatvecQ8MaxTokens; ++t) acc[t] = 0.f;
  for (int64_t sidx = lane; sidx < n_sub; sidx += kWarpSize) {
    Sub32 s;
    unpack(blocks[sidx / kSubs], (int)(sidx % kSubs), s);
    int wq[8];
    memcpy(wq, s.q, 32);
#pragma unroll
    for (int t = 0; t < kMatvecQ8MaxTokens; ++t) {
      if (t >= n_tok) break;
      const int4* xp = reinterpret_cast<const int4*>(xq + (int64_t)t * n_cols + sidx * 32);
      const int4 a = xp[0], b = xp[1];
      int lo = 0, hi = 0;
      lo = __dp4a(wq[0], a.x, lo); lo = __dp4a(wq[1], a.y, lo); lo = __dp4a(wq[2], a.z, lo); lo = __dp4a(wq[3], a.w, lo);
      hi = __dp4a(wq[4], b.x, hi); hi = __dp4a(wq[5], b.y, hi); hi = __dp4a(wq[6], b.z, hi); hi = __dp4a(wq[7], b.w, hi);
      const int64_t xb = (int64_t)t * n_sub + sidx;
      acc[t] += xd[xb] * (s.d0 * (float)lo + s.d1 * (float)hi) + s.m * xs[xb];
    }
  }
#pragma unroll
  for (int t = 0; t < kMatvecQ8MaxTokens; ++t) {
    if (t >= n_tok) break;
    acc[t] = warp_sum_f32(acc[t]);
  }
}

// row_dots for two rows at once (gate and up): both rows' loads are in flight together; each
// row's sums are formed in row_dots' order, so the bits are the same.
template <typename Block, int QK>
__device__ __forceinline__ void row_dots2(const Block* __restrict__ ba, const Block* __restrict__ bb, int64_t n_cols,
                                          int n_tok, const int8_t* xq, const float* xd, const float* xs, int lane,
                                          float (&acc_a)[kMatvecQ8MaxTokens], float (&acc_b)[kMatvecQ8MaxTokens]) {
  constexpr int kSubs = QK / 32;
  const int64_t n_sub = n_cols / 32;
#pragma unroll
  for (int t = 0; t < kMatvecQ8MaxTokens; ++t) acc_a[t] = acc_b[t] = 0.f;
  for (int64_t sidx = lane; sidx < n_sub; sidx += kWarpSize) {
    Sub32 sa, sb;
    unpack(ba[sidx / kSubs], (int)(sidx % kSubs), sa);
    unpack(bb[sidx / kSubs], (int)(sidx % kSubs), sb);
    int wa[8], wb[8];
    memcpy(wa, sa.q, 32);
    memcpy(wb, sb.q, 32);
#pragma unroll
    for (int t = 0; t < kMatvecQ8MaxTokens; ++t) {
      if (t >= n_tok) break;
      const int4* xp = reinterpret_cast<const int4*>(xq + (int64_t)t * n_cols + sidx * 32);
      const int4 a = xp[0], b = xp[1];
      const int64_t xb = (int64_t)t * n_sub + sidx;
      int lo = 0, hi = 0;
      lo = __dp4a(wa[0], a.x, lo); lo = __dp4a(wa[1], a.y, lo); lo = __dp4a(wa[2], a.z, lo); lo = __dp4a(wa[3], a.w, lo);
      hi = __dp4a(wa[4], b.x, hi); hi = __dp4a(wa[5], b.y, hi); hi = __dp4a(wa[6], b.z, hi); hi = __dp4a(wa[7], b.w, hi);
      acc_a[t] += xd[xb] * (sa.d0 * (float)lo + sa.d1 * (float)hi) + sa.m * xs[xb];
      lo = 0;
      hi = 0;
      lo = __dp4a(wb[0], a.x, lo); lo = __dp4a(wb[1], a.y, lo); lo = __dp4a(wb[2], a.z, lo); lo = __dp4a(wb[3], a.w, lo);
      hi = __dp4a(wb[4], b.x, hi); hi = __dp4a(wb[5], b.y, hi); hi = __dp4a(wb[6], b.z, hi); hi = __dp4a(wb[7], b.w, hi);
      acc_b[t] += xd[xb] * (sb.d0 * (float)lo + sb.d1 * (float)hi) + sb.m * xs[xb];
    }
  }
#pragma unroll
  for (int t = 0; t < kMatvecQ8MaxTokens; ++t) {
    if (t >= n_tok) break;
    acc_a[t] = warp_sum_f32(acc_a[t]);
    acc_b[t] = warp_sum_f32(acc_b[t]);
  }
}

// quantize_q8_kernel's arithmetic for one 32-value block held by a warp (v: this lane's value).
__device__ __forceinline__ void quantize_block(float v, int lane, int8_t* xq, float* xd, float* xs) {
  float amax = fabsf(v);
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float d = amax / 127.f;
  const int q = d > 0.f ? __float2int_rn(v / d) : 0;
  xq[lane] = (int8_t)q;
  int sum = q;
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) {
    *xd = d;
    *xs = d * (float)sum;
  }
}

template <typename Block, int QK>
__global__ void __launch_bounds__(kRowsPerBlock * kWarpSize)
matvec_q8_kernel(const uint8_t* __restrict__ w, size_t row_stride, int64_t n_rows, int64_t n_cols, int n_tok,
                 const int8_t* __restrict__ xq, const float* __restrict__ xd, const float* __restrict__ xs,
                 float* __restrict__ y, const float* __restrict__ bias) {
  pdl_begin();
  const int64_t row = (int64_t)blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= n_rows) return;
  float acc[kMatvecQ8MaxTokens];
  row_dots<Block, QK>(reinterpret_cast<const Block*>(w + row * row_stride), n_cols, n_tok, xq, xd, xs, lane, acc);
#pragma unroll
  for (int t = 0; t < kMatvecQ8MaxTokens; ++t) {
    if (t >= n_tok) break;
    if (lane == 0) y[(int64_t)t * n_rows + row] = bias ? acc[t] + bias[row] : acc[t];
  }
}

// Decode matmul in one launch: every thread block quantizes x itself into shared memory (the
// same arithmetic as quantize_q8_kernel), then its warps take one row each. Eight warps, each
// loading its share of x (up to kSelfUnroll blocks of 32) before quantizing any of it.
constexpr int kSelfRows = 8, kSelfUnroll = 4;
template <typename Block, int QK, bool kAccumulate>
__global__ void __launch_bounds__(kSelfRows * kWarpSize)
matvec_q8_self_kernel(const uint8_t* __restrict__ w, size_t row_stride, int64_t n_rows, int64_t n_cols, int n_tok,
                      const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ bias) {
  pdl_begin();
  extern __shared__ __align__(16) uint8_t smem[];
  const int64_t n_blocks = n_tok * (n_cols / 32);
  int8_t* sq = reinterpret_cast<int8_t*>(smem);
  float* sd = reinterpret_cast<float*>(smem + n_tok * n_cols);
  float* ss = sd + n_blocks;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
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
      if (blk < n_blocks) quantize_block(v[u], lane, sq + blk * 32, sd + blk, ss + blk);
    }
  }
  __syncthreads();
  const int64_t row = (int64_t)blockIdx.x * kSelfRows + warp;
  if (row >= n_rows) return;
  float acc[kMatvecQ8MaxTokens];
  row_dots<Block, QK>(reinterpret_cast<const Block*>(w + row * row_stride), n_cols, n_tok, sq, sd, ss, lane, acc);
#pragma unroll
  for (int t = 0; t < kMatvecQ8MaxTokens; ++t) {
    if (t >= n_tok) break;
    if (lane != 0) continue;
    const float v = bias ? acc[t] + bias[row] : acc[t];
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

template <typename Block, int QK>
__global__ void __launch_bounds__(kRowsPerBlock * kWarpSize)
matvec_q8_multi_kernel(MultiArgs a, int64_t n_cols, int n_tok, const int8_t* __restrict__ xq,
                       const float* __restrict__ xd, const float* __restrict__ xs) {
  pdl_begin();
  const int i = blockIdx.x >= a.first[1] ? (blockIdx.x >= a.first[2] ? 2 : 1) : 0;
  const int64_t row = (int64_t)(blockIdx.x - a.first[i]) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t n_rows = a.rows[i];
  if (row >= n_rows) return;
  float acc[kMatvecQ8MaxTokens];
  row_dots<Block, QK>(reinterpret_cast<const Block*>(a.w[i] + row * a.stride[i]), n_cols, n_tok, xq, xd, xs, lane, acc);
  const float* bias = a.bias[i];
#pragma unroll
  for (int t = 0; t < kMatvecQ8MaxTokens; ++t) {
    if (t >= n_tok) break;
    if (lane == 0) a.y[i][(int64_t)t * n_rows + row] = bias ? acc[t] + bias[row] : acc[t];
  }
}

// h = act(x·gateᵀ) ⊙ (x·upᵀ): a warp takes row r of both (elementwise.cu's formulas).
template <typename Block, int QK, int kAct>
__global__ void __launch_bounds__(kRowsPerBlock * kWarpSize)
matvec_q8_gate_up_kernel(const uint8_t* __restrict__ wg, size_t sg, const uint8_t* __restrict__ wu, size_t su,
                         int64_t n_rows, int64_t n_cols, int n_tok, const int8_t* __restrict__ xq,
                         const float* __restrict__ xd, const float* __restrict__ xs, float* __restrict__ h) {
  pdl_begin();
  const int64_t row = (int64_t)blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= n_rows) return;
  float g[kMatvecQ8MaxTokens], u[kMatvecQ8MaxTokens];
  row_dots2<Block, QK>(reinterpret_cast<const Block*>(wg + row * sg), reinterpret_cast<const Block*>(wu + row * su),
                       n_cols, n_tok, xq, xd, xs, lane, g, u);
#pragma unroll
  for (int t = 0; t < kMatvecQ8MaxTokens; ++t) {
    if (t >= n_tok) break;
    if (lane != 0) continue;
    const float x = g[t];
    float r;
    if (kAct == 0) {
      r = x / (1.f + expf(-x)) * u[t];
    } else {
      constexpr float kSqrt2OverPi = 0.79788456080286535588f;
      r = 0.5f * x * (1.f + tanhf(kSqrt2OverPi * x * (1.f + 0.044715f * x * x))) * u[t];
    }
    h[(int64_t)t * n_rows + row] = r;
  }
}

// xn = rms_norm(x)·w (rms_norm.cu's arithmetic: one block of 256 per row, the sum of squares in
// double) and its int8 quantization per 32 values, in one launch.
constexpr int kNormThreads = 256;
__global__ void __launch_bounds__(kNormThreads)
norm_quant_kernel(const float* __restrict__ x, const float* __restrict__ w, float eps, int64_t dim,
                  float* __restrict__ xn, int8_t* __restrict__ xq, float* __restrict__ xd, float* __restrict__ xs) {
  pdl_begin();
  const float* xr = x + blockIdx.x * dim;
  const float inv = row_inv_rms<kNormThreads>(xr, dim, eps);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t n_sub = dim / 32, b0 = (int64_t)blockIdx.x * n_sub;
  for (int64_t sb = warp; sb < n_sub; sb += kNormThreads / kWarpSize) {
    const int64_t i = sb * 32 + lane;
    const float v = xr[i] * inv * w[i];
    xn[blockIdx.x * dim + i] = v;
    quantize_block(v, lane, xq + (b0 + sb) * 32, xd + b0 + sb, xs + b0 + sb);
  }
}

}  // namespace

bool matvec_q8_supported(GGMLType t) {
  return dispatch_block_type(t, [](auto) {});
}

size_t matvec_q8_scratch_bytes(int64_t n_tok, int64_t n_cols) {
  return (size_t)n_tok * n_cols + 2 * sizeof(float) * (size_t)n_tok * (n_cols / 32) + 64;
}

void matvec_q8(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias, void* scratch,
               cudaStream_t stream) {
  if (n_tok > kMatvecQ8MaxTokens || w.n_cols % 32)
    throw Error("backend", "invalid_argument",
                strfmt("cuda matvec_q8: %lld tokens of %lld columns", (long long)n_tok, (long long)w.n_cols));
  auto* xq = static_cast<int8_t*>(scratch);
  const int64_t n_blocks = n_tok * (w.n_cols / 32);
  // fp32 scales after the int8 values, 16-byte aligned (n_cols is a multiple of 32).
  auto* xd = reinterpret_cast<float*>(xq + n_tok * w.n_cols);
  float* xs = xd + n_blocks;
  launch_kernel(quantize_q8_kernel, (unsigned)((n_blocks * kWarpSize + 255) / 256), 256, 0, stream,
      x, n_blocks, xq, xd, xs);
  GAACRT_CUDA_CHECK(cudaGetLastError());
  const unsigned grid = (unsigned)((w.n_rows + kRowsPerBlock - 1) / kRowsPerBlock);
  dispatch_block_type(w.type, [&](auto bt) {
    using BT = decltype(bt);
    launch_kernel(matvec_q8_kernel<typename BT::block, BT::qk>, grid, kRowsPerBlock * kWarpSize, 0, stream,
        static_cast<const uint8_t*>(w.data), w.row_stride, w.n_rows, w.n_cols, (int)n_tok, xq, xd, xs, y, bias);
  });
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

namespace {
void check_q8(const WeightView& w, int64_t n_tok, int64_t n_cols, const char* what) {
  if (n_tok > kMatvecQ8MaxTokens || n_tok <= 0 || w.n_cols != n_cols || n_cols % 32 || !matvec_q8_supported(w.type))
    throw Error("backend", "invalid_argument",
                strfmt("cuda %s: %lld tokens of %lld columns (weight %lld columns, %s)", what, (long long)n_tok,
                       (long long)n_cols, (long long)w.n_cols, type_name(w.type)));
}
}  // namespace

Q8Act q8_act(void* scratch, int64_t n_tok, int64_t n_cols) {
  Q8Act a;
  a.q = static_cast<int8_t*>(scratch);
  a.d = reinterpret_cast<float*>(a.q + n_tok * n_cols);
  a.s = a.d + n_tok * (n_cols / 32);
  a.n_tok = n_tok;
  a.n_cols = n_cols;
  return a;
}

void norm_quant_q8(const float* x, const float* norm_w, float eps, int64_t n_tok, int64_t dim, float* xn, const Q8Act& a,
                   cudaStream_t stream) {
  if (dim % 32 || n_tok != a.n_tok || dim != a.n_cols)
    throw Error("backend", "invalid_argument", strfmt("cuda norm_quant_q8: %lld x %lld", (long long)n_tok, (long long)dim));
  launch_kernel(norm_quant_kernel, (unsigned)n_tok, kNormThreads, 0, stream, x, norm_w, eps, dim, xn, a.q, a.d, a.s);
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

void matvec_q8_multi(const WeightView* w, int n_w, float* const* y, const float* const* bias, const Q8Act& a,
                     cudaStream_t stream) {
  if (n_w < 1 || n_w > 3) throw Error("backend", "invalid_argument", strfmt("cuda matvec_q8_multi: %d matrices", n_w));
  bool same = true;
  for (int i = 0; i < n_w; ++i) {
    check_q8(w[i], a.n_tok, a.n_cols, "matvec_q8_multi");
    same = same && w[i].type == w[0].type;
  }
  if (!same) {  // mixed types: one launch per matrix over the same quantized x
    for (int i = 0; i < n_w; ++i) {
      const unsigned grid = (unsigned)((w[i].n_rows + kRowsPerBlock - 1) / kRowsPerBlock);
      dispatch_block_type(w[i].type, [&](auto bt) {
        using BT = decltype(bt);
        launch_kernel(matvec_q8_kernel<typename BT::block, BT::qk>, grid, kRowsPerBlock * kWarpSize, 0, stream,
            static_cast<const uint8_t*>(w[i].data), w[i].row_stride, w[i].n_rows, a.n_cols, (int)a.n_tok, a.q, a.d,
            a.s, y[i], bias ? bias[i] : nullptr);
      });
      GAACRT_CUDA_CHECK(cudaGetLastError());
    }
    return;
  }
  MultiArgs m{};
  m.first[0] = 0;
  for (int i = 0; i < 3; ++i) {
    const bool on = i < n_w;
    m.w[i] = on ? static_cast<const uint8_t*>(w[i].data) : nullptr;
    m.stride[i] = on ? w[i].row_stride : 0;
    m.rows[i] = on ? w[i].n_rows : 0;
    m.y[i] = on ? y[i] : nullptr;
    m.bias[i] = on && bias ? bias[i] : nullptr;
    m.first[i + 1] = m.first[i] + (unsigned)((m.rows[i] + kRowsPerBlock - 1) / kRowsPerBlock);
  }
  dispatch_block_type(w[0].type, [&](auto bt) {
    using BT = decltype(bt);
    launch_kernel(matvec_q8_multi_kernel<typename BT::block, BT::qk>, m.first[3], kRowsPerBlock * kWarpSize, 0, stream,
        m, a.n_cols, (int)a.n_tok, a.q, a.d, a.s);
  });
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

bool matvec_q8_gate_up(const WeightView& gate, const WeightView& up, Activation act, float* h, const Q8Act& a,
                       cudaStream_t stream) {
  if (gate.type != up.type || gate.n_rows != up.n_rows || (act != Activation::SiLU && act != Activation::GeluTanh))
    return false;
  check_q8(gate, a.n_tok, a.n_cols, "matvec_q8_gate_up");
  check_q8(up, a.n_tok, a.n_cols, "matvec_q8_gate_up");
  const unsigned grid = (unsigned)((gate.n_rows + kRowsPerBlock - 1) / kRowsPerBlock);
  dispatch_block_type(gate.type, [&](auto bt) {
    using BT = decltype(bt);
    const auto* g = static_cast<const uint8_t*>(gate.data);
    const auto* u = static_cast<const uint8_t*>(up.data);
    if (act == Activation::SiLU)
      launch_kernel(matvec_q8_gate_up_kernel<typename BT::block, BT::qk, 0>, grid, kRowsPerBlock * kWarpSize, 0, stream,
          g, gate.row_stride, u, up.row_stride, gate.n_rows, a.n_cols, (int)a.n_tok, a.q, a.d, a.s, h);
    else
      launch_kernel(matvec_q8_gate_up_kernel<typename BT::block, BT::qk, 1>, grid, kRowsPerBlock * kWarpSize, 0, stream,
          g, gate.row_stride, u, up.row_stride, gate.n_rows, a.n_cols, (int)a.n_tok, a.q, a.d, a.s, h);
  });
  GAACRT_CUDA_CHECK(cudaGetLastError());
  return true;
}

bool matvec_q8_self(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias,
                    cudaStream_t stream, bool accumulate) {
  const size_t smem = (size_t)n_tok * w.n_cols + 2 * sizeof(float) * (size_t)n_tok * (w.n_cols / 32);
  if (smem > kMatvecQ8SelfMaxSmem || n_tok > kMatvecQ8MaxTokens || w.n_cols % 32) return false;
  const unsigned grid = (unsigned)((w.n_rows + kSelfRows - 1) / kSelfRows);
  dispatch_block_type(w.type, [&](auto bt) {
    using BT = decltype(bt);
    if (accumulate)
      launch_kernel(matvec_q8_self_kernel<typename BT::block, BT::qk, true>, grid, kSelfRows * kWarpSize, smem, stream,
          static_cast<const uint8_t*>(w.data), w.row_stride, w.n_rows, w.n_cols, (int)n_tok, x, y, bias);
    else
      launch_kernel(matvec_q8_self_kernel<typename BT::block, BT::qk, false>, grid, kSelfRows * kWarpSize, smem, stream,
          static_cast<const uint8_t*>(w.data), w.row_stride, w.n_rows, w.n_cols, (int)n_tok, x, y, bias);
  });
  GAACRT_CUDA_CHECK(cudaGetLastError());
  return true;
}

}  // namespace gaacrt::cuda
