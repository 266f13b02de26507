// rope.cu — rotary position embedding on the GPU, NORM (adjacent pairs) and NEOX (half split),
// with freq_factors, linear scaling and YaRN (spec/gguf.md §3.1). Same arithmetic as the CPU
// reference (backends/cpu/rope.cpp): inverse frequency, angle, cos and sin in double, the
// rotation in float; positions are read from device memory (nothing host-side per token).
#include <algorithm>
#include <cmath>

#include "common/half.h"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "kernels/rope_math.cuh"
#include "lossy_ops.h"

namespace gaacrt::cuda {
namespace {

constexpr int kThreads = 128;

// Thread idx's work: token t, the channels a and b of pair i (interleaved or NeoX halves), and
// the pair's cos/sin at the token's position.
struct RopePair {
  int64_t t;
  int a, b;
  float cs, sn;
};
__device__ __forceinline__ RopePair rope_pair(int64_t idx, const int32_t* pos, const float* freq_factors,
                                              const RopeConst& c) {
  RopePair r;
  r.t = idx / c.half;
  const int i = (int)(idx % c.half);
  rope_cs(i, pos[r.t], freq_factors, c, r.cs, r.sn);
  rope_channels(i, c, r.a, r.b);
  return r;
}

// Rotates pair (a, b) of head h of the token in x (n_tok, n_heads, head_dim).
__device__ __forceinline__ void rotate_head(float* x, const RopePair& p, int32_t h, int32_t n_heads,
                                            int32_t head_dim) {
  float* v = x + (p.t * n_heads + h) * head_dim;
  float x0 = v[p.a], x1 = v[p.b];
  rope_rotate(x0, x1, p.cs, p.sn);
  v[p.a] = x0;
  v[p.b] = x1;
}

// One thread per (head, token, pair i). (A thread per pair looping over the heads waited out one
// memory round trip per head at decode.)
__global__ void rope_kernel(float* x, int64_t n_tok, int32_t n_heads, int32_t head_dim, const int32_t* __restrict__ pos,
                            const float* __restrict__ freq_factors, RopeConst c) {
  pdl_begin();
  const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, n_pairs = n_tok * c.half;
  if (idx >= n_pairs * n_heads) return;
  rotate_head(x, rope_pair(idx % n_pairs, pos, freq_factors, c), (int32_t)(idx / n_pairs), n_heads, head_dim);
}

// qk_rope_store without q/k norms, whole-head rotation: rope_kernel on q and k, then kv_store of
// k and v. One thread per (head, token, pair i) — q's heads, then k's, whose threads also store
// the rotated k pair and the v pair: at decode a thread per pair looping over the heads waited
// out one memory round trip per head (17 µs a layer on the H200). Same bits.
//
// Only q, k and v come from the previous kernel (the Q/K/V matvec). The positions, the slots and
// the block table were written before the step began, so each thread reads them, computes its
// pair's cos and sin (double precision: the longest part) and finds the four bf16 destinations
// before it waits for that kernel (PDL); after the wait it is one load, the rotation and the stores.
__global__ void rope_store_kernel(float* q, float* k, const float* __restrict__ v, int64_t n_tok, int32_t n_head,
                                  int32_t head_dim, const int32_t* __restrict__ pos, const float* __restrict__ freq_factors,
                                  RopeConst c, KVLayerView kv, const KVTokenSlot* __restrict__ slots) {
  const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, n_pairs = n_tok * c.half;
  const bool live = idx < n_pairs * (n_head + kv.n_head_kv);
  const int32_t hs = live ? (int32_t)(idx / n_pairs) : 0;
  RopePair p{};
  uint16_t* dst[4] = {};  // K's channels a, b, then V's
  if (live) {
    p = rope_pair(idx % n_pairs, pos, freq_factors, c);
    if (hs >= n_head) {
      const KVTokenSlot s = slots[p.t];
      dst[0] = bf16_dst(kv, s, hs - n_head, 0, p.a);
      dst[1] = bf16_dst(kv, s, hs - n_head, 0, p.b);
      dst[2] = bf16_dst(kv, s, hs - n_head, 1, p.a);
      dst[3] = bf16_dst(kv, s, hs - n_head, 1, p.b);
    }
  }
  pdl_begin();
  if (!live) return;
  if (hs < n_head) {
    rotate_head(q, p, hs, n_head, head_dim);
    return;
  }
  const int32_t h = hs - n_head;
  rotate_head(k, p, h, kv.n_head_kv, head_dim);
  const float* kr = k + (p.t * kv.n_head_kv + h) * head_dim;
  const float* vr = v + (p.t * kv.n_head_kv + h) * head_dim;
  *dst[0] = f32_to_bf16(kr[p.a]);
  *dst[1] = f32_to_bf16(kr[p.b]);
  *dst[2] = f32_to_bf16(vr[p.a]);
  *dst[3] = f32_to_bf16(vr[p.b]);
}

}  // namespace

RopeConst rope_const(const RopeParams& p, int32_t head_dim) {
  if (p.n_rot <= 0 || p.n_rot % 2 || p.n_rot > head_dim)
    throw Error("backend", "invalid_argument",
                strfmt("cuda rope: n_rot %d must be even and in (0, head_dim %d]", p.n_rot, head_dim));
  RopeConst c;
  c.n_rot = p.n_rot;
  c.half = p.n_rot / 2;
  c.style = p.style == RopeStyle::Norm ? 0 : 2;
  c.base = p.base;
  c.freq_scale = p.freq_scale;
  c.ext_factor = p.ext_factor;
  c.mscale = p.attn_factor;
  c.corr0 = c.corr1 = 0.f;
  if (p.ext_factor != 0.f) {
    // YaRN correction dims and magnitude, computed as the CPU reference does (float math).
    auto corr = [&](float n) {
      return p.n_rot * std::log((float)p.n_ctx_orig / (n * 2.f * (float)M_PI)) / (2.f * std::log(p.base));
    };
    c.corr0 = std::max(0.f, std::floor(corr(p.beta_fast)));
    c.corr1 = std::min((float)p.n_rot - 1, std::ceil(corr(p.beta_slow)));
    c.mscale *= 1.f + 0.1f * std::log(1.f / p.freq_scale);
  }
  return c;
}

bool rope_store_fuses(const float* q_norm, const float* k_norm, const RopeParams& rope, const KVLayerView& kv) {
  return !q_norm && !k_norm && rope.n_rot == kv.head_dim_k && kv.head_dim_k == kv.head_dim_v &&
         kv.head_dim_k == kv.tile_dim * kv.n_half &&
         (kv.format == KVFormat::BF16 || kv.format == KVFormat::GAAC || lossy::is_lossy(kv.format));
}

void CudaBackend::rope(float* x, int64_t n_tok, int32_t n_heads, int32_t head_dim, const int32_t* pos,
                       const RopeParams& p) {
  if (n_tok <= 0 || n_heads <= 0) return;
  const RopeConst c = rope_const(p, head_dim);
  const int64_t n = n_tok * c.half * n_heads;
  launch_kernel(rope_kernel, (unsigned)((n + kThreads - 1) / kThreads), kThreads, 0, stream_, x, n_tok, n_heads,
                head_dim, pos, p.freq_factors, c);
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

void CudaBackend::qk_rope_store(float* q, float* k, const float* v, int64_t n_tok, int32_t n_head, const float* q_norm,
                                const float* k_norm, float eps, const int32_t* pos, const RopeParams& rope,
                                const KVLayerView& kv, const KVTokenSlot* slots) {
  if (!rope_store_fuses(q_norm, k_norm, rope, kv) || n_tok <= 0) {
    Backend::qk_rope_store(q, k, v, n_tok, n_head, q_norm, k_norm, eps, pos, rope, kv, slots);
    return;
  }
  const RopeConst c = rope_const(rope, kv.head_dim_k);
  const int64_t n = n_tok * c.half * (n_head + kv.n_head_kv);
  launch_kernel(rope_store_kernel, (unsigned)((n + kThreads - 1) / kThreads), kThreads, 0, stream_,
      q, k, v, n_tok, n_head, kv.head_dim_k, pos, rope.freq_factors, c, kv, slots);
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gaacrt::cuda
