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

template <typename Block, int QK>
__global__ void __launch_bounds__(kRowsPerBlock * kWarpSize)
matvec_q8_kernel(const uint8_t* __restrict__ w, size_t row_stride, int64_t n_rows, int64_t n_cols, int n_tok,
                 const int8_t* __restrict__ xq, const float* __restrict__ xd, const float* __restrict__ xs,
                 float* __restrict__ y, const float* __restrict__ bias) {
  const int64_t row = (int64_t)blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= n_rows) return;
  const Block* blocks = reinterpret_cast<const Block*>(w + row * row_stride);
  constexpr int kSubs = QK / 32;
  const int64_t n_sub = n_cols / 32;
  float acc[kMatvecQ8MaxTokens];
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
    const float v = warp_sum_f32(acc[t]);
    if (lane == 0) y[(int64_t)t * n_rows + row] = bias ? v + bias[row] : v;
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
  quantize_q8_kernel<<<(unsigned)((n_blocks * kWarpSize + 255) / 256), 256, 0, stream>>>(x, n_blocks, xq, xd, xs);
  GAACRT_CUDA_CHECK(cudaGetLastError());
  const unsigned grid = (unsigned)((w.n_rows + kRowsPerBlock - 1) / kRowsPerBlock);
  dispatch_block_type(w.type, [&](auto bt) {
    using BT = decltype(bt);
    matvec_q8_kernel<typename BT::block, BT::qk><<<grid, kRowsPerBlock * kWarpSize, 0, stream>>>(
        static_cast<const uint8_t*>(w.data), w.row_stride, w.n_rows, w.n_cols, (int)n_tok, xq, xd, xs, y, bias);
  });
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gaacrt::cuda
