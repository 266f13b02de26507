// kv_finalize_lossy.cu — kv_finalize for E8 k2v2, q8 and kivi2 on the GPU: the portable codecs
// of src/codec (e8_encode.h, e8_layout.h, asym2.h, q8_tile.h) run in kernels, in the same order
// of float operations as the CPU (backends/cpu/kv_finalize_lossy.cpp, src/codec/e8/e8_keys.cpp,
// src/codec/scalar/scalar_codecs.cpp). The target builds with --fmad=false, IEEE division and
// square root, so every slot is byte-identical to the CPU's (tests/test_cuda_lossy.py).
//
//   E8 keys: one thread block per (kv-head, block) group, encoded only when every half of the
//            group has a job (as on the CPU): BF16 -> fp32 (minus the head's mean when centering),
//            k~ = R k with e8_dot8's 8-lane order, norm, the two-branch exact E8P12 search per
//            8-dim block (e8_encode_block, one thread each), quads and norms stored per half.
//   values (E8, kivi2), q8: one thread per (token, group of 32); kivi2 keys: one per channel.
#include "codec/e8/e8_encode.h"
#include "codec/e8/e8_layout.h"
#include "codec/scalar/asym2.h"
#include "codec/scalar/q8_tile.h"
#include "common/half.h"
#include "cuda_common.h"
#include "kv/lossy_codecs.h"
#include "lossy_ops.h"

namespace gaacrt::cuda::lossy {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxD = 256;  // two 128-channel halves
// Rows of the keys in shared memory are padded by 4 floats: the 16 tokens a half-warp reads at
// once then start in 16 different 4-bank groups (unpadded, every row starts in bank 0).
constexpr int kRowPad = 4;

__device__ __forceinline__ void st16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

// e8_simd.h's e8_dot8: 8 lanes, ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)), no FMA. a and b are 16-byte
// aligned (rows of R, padded rows in shared memory).
__device__ __forceinline__ float dot8(const float* a, const float* b, int32_t d) {
  float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
#pragma unroll 4
  for (int32_t j = 0; j < d / 4; j += 2) {
    const float4 a0 = a4[j], a1 = a4[j + 1], b0 = b4[j], b1 = b4[j + 1];
    l[0] = __fadd_rn(l[0], __fmul_rn(a0.x, b0.x));
    l[1] = __fadd_rn(l[1], __fmul_rn(a0.y, b0.y));
    l[2] = __fadd_rn(l[2], __fmul_rn(a0.z, b0.z));
    l[3] = __fadd_rn(l[3], __fmul_rn(a0.w, b0.w));
    l[4] = __fadd_rn(l[4], __fmul_rn(a1.x, b1.x));
    l[5] = __fadd_rn(l[5], __fmul_rn(a1.y, b1.y));
    l[6] = __fadd_rn(l[6], __fmul_rn(a1.z, b1.z));
    l[7] = __fadd_rn(l[7], __fmul_rn(a1.w, b1.w));
  }
  return __fadd_rn(__fadd_rn(__fadd_rn(l[0], l[4]), __fadd_rn(l[2], l[6])),
                   __fadd_rn(__fadd_rn(l[1], l[5]), __fadd_rn(l[3], l[7])));
}

__device__ void encode_e8_keys(const KVLayerView& kv, const KVFinalizeJob* jobs, int64_t n_jobs, int64_t self) {
  constexpr int32_t kStride = kMaxD + kRowPad;
  __shared__ __align__(16) float k[KV_BLOCK_TOKENS * kStride], kr[KV_BLOCK_TOKENS * kStride];
  __shared__ float scale[KV_BLOCK_TOKENS], norms[KV_BLOCK_TOKENS];
  __shared__ uint16_t codes[KV_BLOCK_TOKENS * kMaxD / 8];
  __shared__ uint32_t page_of[2];
  __shared__ uint32_t slot_of[2];
  const KVFinalizeJob& me = jobs[self];
  const int32_t d = kv.head_dim_k, T = kv.tile_dim, M = d / 8, tid = threadIdx.x, S = d + kRowPad;
  if (tid == 0)
    for (int64_t i = 0; i < n_jobs; ++i)
      if (!jobs[i].is_v && jobs[i].head == me.head && jobs[i].block == me.block) {
        page_of[jobs[i].half] = jobs[i].raw_page;
        slot_of[jobs[i].half] = jobs[i].slot;
      }
  __syncthreads();
  const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
  const float* mu = st.mean ? st.mean + (size_t)me.head * d : nullptr;
  const float* scl = st.mean ? st.scale + (size_t)me.head * d : nullptr;  // centering's per-channel scale
  for (int32_t e = tid; e < KV_BLOCK_TOKENS * d; e += kThreads) {
    const int32_t t = e / d, c = e % d, h = c / T, cc = c % T;
    const uint16_t* pg = reinterpret_cast<const uint16_t*>(kv.arena + (uint64_t)page_of[h] * kv.page_bytes);
    float x = bf16_to_f32(pg[t * T + cc]);
    if (mu) x = __fdiv_rn(__fsub_rn(x, mu[c]), scl[c]);  // (k - mean) / scale, as the CPU rounds it
    k[t * S + c] = x;
  }
  __syncthreads();
  // k~_t[i] = <R_i, k_t>. A thread keeps one token (tid % 16) and walks the rows i = tid / 16 + 16 n,
  // so a half-warp reads one row of R (a broadcast) against the 16 tokens. With a row of R per
  // lane instead, every load touched 32 cache lines: 176 µs a launch at head size 128.
  static_assert(kThreads % KV_BLOCK_TOKENS == 0, "whole token groups");
  {
    const int32_t t = tid % KV_BLOCK_TOKENS;
    for (int32_t i = tid / KV_BLOCK_TOKENS; i < d; i += kThreads / KV_BLOCK_TOKENS)
      kr[t * S + i] = dot8(st.rot + (size_t)i * d, k + t * S, d);
  }
  __syncthreads();
  if (tid < KV_BLOCK_TOKENS) {
    const float nrm = sqrtf(dot8(kr + tid * S, kr + tid * S, d));
    norms[tid] = nrm;
    scale[tid] = (nrm > 0.0f && isfinite(nrm)) ? __fdiv_rn(st.alpha, nrm) : 0.0f;
  }
  __syncthreads();
  for (int32_t u = tid; u < KV_BLOCK_TOKENS * M; u += kThreads) {
    const int32_t t = u / M, j = u % M;
    E8Vec8 x;
#pragma unroll
    for (int i = 0; i < E8_BLOCK; ++i) x.v[i] = __fmul_rn(kr[t * S + j * E8_BLOCK + i], scale[t]);
    codes[u] = (uint16_t)e8_encode_block(x).code;
  }
  __syncthreads();
  const int32_t nq = T / E8_QUAD_DIMS, QT = d / E8_QUAD_DIMS;
  for (int32_t u = tid; u < KV_BLOCK_TOKENS * QT; u += kThreads) {
    const int32_t t = u / QT, qg = u % QT, h = qg / nq, q = qg % nq;
    const uint16_t* ct = codes + t * M + 4 * qg;
    const E8Quad quad = e8_quad_pack(ct[0], ct[1], ct[2], ct[3]);
    uint8_t* slot = kv_entry_ptr(kv, slot_of[h], 0);
    e8_st32(slot + e8_k_quad_offset(T, t, q), quad.proto);
    e8_st32(slot + e8_k_quad_offset(T, t, q) + 4, quad.signs);
  }
  for (int32_t u = tid; u < KV_BLOCK_TOKENS * kv.n_half; u += kThreads) {
    const int32_t t = u % KV_BLOCK_TOKENS, h = u / KV_BLOCK_TOKENS;
    e8_st32(kv_entry_ptr(kv, slot_of[h], 0) + e8_k_norm_offset(T, t), f32_to_bits(norms[t]));
  }
}

// v2 tile (asym2.h): token t, group g of 32 channels.
__device__ void encode_v2_group(const uint16_t* raw, int32_t T, int32_t t, int32_t g, uint8_t* slot) {
  float v[ASYM2_VGROUP];
  for (int i = 0; i < ASYM2_VGROUP; ++i) v[i] = bf16_to_f32(raw[t * T + g * ASYM2_VGROUP + i]);
  v2_encode_group(v, T, t, g, slot);
}

__device__ void encode_q8_group(const uint16_t* raw, int32_t T, int32_t t, int32_t g, uint8_t* slot) {
  float x[Q8_GROUP];
  for (int i = 0; i < Q8_GROUP; ++i) x[i] = bf16_to_f32(raw[t * T + g * Q8_GROUP + i]);
  const block_q8_0 b = q8_quantize_group(x);
  uint8_t* dst = slot + q8_block_offset(T, t, g);
  st16(dst, b.d);
  for (int i = 0; i < Q8_GROUP; ++i) dst[2 + i] = (uint8_t)b.qs[i];
}

__device__ void encode_kivi2_channel(const uint16_t* raw, int32_t T, int32_t c, uint8_t* slot) {
  float x[KV_BLOCK_TOKENS];
  for (int t = 0; t < KV_BLOCK_TOKENS; ++t) x[t] = bf16_to_f32(raw[t * T + c]);
  float mn = x[0], mx = x[0];
  for (int t = 1; t < KV_BLOCK_TOKENS; ++t) {
    mn = x[t] < mn ? x[t] : mn;
    mx = x[t] > mx ? x[t] : mx;
  }
  const Asym2Params p = asym2_params(mn, mx);
  uint32_t w = 0;
  for (int t = 0; t < KV_BLOCK_TOKENS; ++t) w |= asym2_code(x[t], p) << (2 * t);
  e8_st32(slot + 4 * c, w);
  uint8_t* pp = slot + kivi2_k_params_offset(T, c);
  st16(pp, p.scale_bits);
  st16(pp + 2, p.zero_bits);
}

// One thread block per job.
__global__ void __launch_bounds__(kThreads) finalize_kernel(KVLayerView kv, KVFinalizeJob* jobs, int64_t n_jobs) {
  pdl_begin();
  const int64_t i = blockIdx.x;
  KVFinalizeJob& j = jobs[i];
  const int32_t T = kv.tile_dim, tid = threadIdx.x;
  if (kv.format == KVFormat::E8 && !j.is_v) {
    // The halves of a (head, block) go together: encoded by the group's first job when all are here.
    int32_t count = 0;
    int64_t leader = -1;
    for (int64_t k = 0; k < n_jobs; ++k)
      if (!jobs[k].is_v && jobs[k].head == j.head && jobs[k].block == j.block) {
        ++count;
        if (leader < 0) leader = k;
      }
    const bool fits = count == kv.n_half;
    if (fits && leader == i) encode_e8_keys(kv, jobs, n_jobs, i);
    if (tid == 0) {
      j.fits = fits ? 1 : 0;
      j.escape_bytes = 0;
    }
    return;
  }
  const uint16_t* raw = reinterpret_cast<const uint16_t*>(kv.arena + (uint64_t)j.raw_page * kv.page_bytes);
  uint8_t* slot = kv_entry_ptr(kv, j.slot, j.is_v);
  const int32_t groups = T / 32;
  if (kv.format == KVFormat::KIVI2 && !j.is_v) {
    for (int32_t c = tid; c < T; c += kThreads) encode_kivi2_channel(raw, T, c, slot);
  } else if (kv.format == KVFormat::Q8) {
    for (int32_t u = tid; u < KV_BLOCK_TOKENS * groups; u += kThreads) encode_q8_group(raw, T, u / groups, u % groups, slot);
  } else {
    for (int32_t u = tid; u < KV_BLOCK_TOKENS * groups; u += kThreads) encode_v2_group(raw, T, u / groups, u % groups, slot);
  }
  if (tid == 0) {
    j.fits = 1;
    j.escape_bytes = 0;
  }
}

}  // namespace

void kv_finalize(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs, cudaStream_t stream) {
  if (n_jobs <= 0) return;
  const int32_t T = kv.tile_dim;
  if (T < 32 || T > KV_TILE_MAX_DIM || T % 32 || kv.n_half < 1 || kv.n_half > 2 || kv.head_dim_k != T * kv.n_half ||
      kv.head_dim_v != T * kv.n_half)
    throw Error("backend", "invalid_argument",
                strfmt("cuda kv_finalize: %s cache with head dims %d/%d (tile %d x %d) is unsupported (tiles of 32..128 "
                       "channels, multiples of 32, at most two)", kv.format == KVFormat::E8 ? "e8" : "q8/kivi2",
                       kv.head_dim_k, kv.head_dim_v, kv.n_half, T));
  check_e8_view(kv, T, "kv_finalize");
  if (n_jobs > 0x7fffffff) throw Error("backend", "invalid_argument", "cuda kv_finalize: too many jobs");
  launch_kernel(finalize_kernel, (unsigned)n_jobs, kThreads, 0, stream, kv, jobs, n_jobs);
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gaacrt::cuda::lossy
