// kv_finalize_lossy.cu — kv_finalize for E8 k2v2, q8 and kivi2 on the GPU: the portable codecs
// of src/codec (e8_encode.h, e8_layout.h, asym2.h, q8_tile.h) run in kernels, in the same order
// of float operations as the CPU (backends/cpu/kv_finalize_lossy.cpp, src/codec/e8/e8_keys.cpp,
// src/codec/scalar/scalar_codecs.cpp). The target builds with --fmad=false, IEEE division and
// square root, so every slot is byte-identical to the CPU's (tests/test_cuda_lossy.py).
//
//   E8 keys: one thread block per (kv-head, block) group, its 16 tokens together (a decode
//            step's few groups: a thread block per 2 tokens), encoded only when every half of the
//            group has a job (as on the CPU): BF16 -> fp32 (minus the head's mean when
//            centering), k~ = R k with e8_dot8's 8-lane order (8 lanes per row), norm, the
//            two-branch exact E8P12 search per 8-dim block (e8_encode_block, one thread each),
//            quads and norm stored per half.
//   values (E8, kivi2), q8: one thread per (token, group of 32); kivi2 keys: one per channel.
#include <cstdlib>

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
constexpr uint32_t kFull = 0xffffffffu;

__device__ __forceinline__ void st16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

// e8_simd.h's e8_dot8 of a row of length d, spread over the 8 lanes of an aligned group: lane
// sub = lane % 8 sums a[j + sub] * b[j + sub] over j = 0, 8, 16, ... in order (the CPU's lane
// sub), then the shuffles combine them as ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)) — a float add
// gives the same bits in either operand order. No FMA. Every lane of the group gets the result.
// lanes8_sum is the combining step, for callers that make the lane sums themselves.
__device__ __forceinline__ float lanes8_sum(float l) {
  l = __fadd_rn(l, __shfl_xor_sync(kFull, l, 4));  // l0+l4, l1+l5, l2+l6, l3+l7
  l = __fadd_rn(l, __shfl_xor_sync(kFull, l, 2));  // (l0+l4)+(l2+l6), (l1+l5)+(l3+l7)
  return __fadd_rn(l, __shfl_xor_sync(kFull, l, 1));
}
__device__ __forceinline__ float dot8_lanes(const float* a, const float* b, int32_t d) {
  const int sub = threadIdx.x & 7;
  float l = 0.f;
#pragma unroll 8
  for (int32_t j = 0; j < d; j += 8) l = __fadd_rn(l, __fmul_rn(a[j + sub], b[j + sub]));
  return lanes8_sum(l);
}

// The keys of tokens t0 .. t0 + nt - 1 of a (kv-head, block) group whose halves' raw pages and
// slots are page_of / slot_of, every thread taking part in each step: an 8-lane group of the
// rotation keeps its row of R in registers for the nt tokens, and the exact E8 search (thousands
// of dependent instructions, local memory for its sort) runs for all nt x d/8 blocks at once (in
// two rounds for 16 tokens at d = 256). A prefill's launch gives a thread block the group's 16
// tokens, a decode step's 2: its few groups are latency (a thread block per group once kept 8 SMs
// busy for 28 µs at batch 1). (The first version took one thread block per token: R read from L2
// once per token, the search on 16 of 256 threads, ~10 waves of such blocks for a 512-token
// prefill of the 8B shape: 95 µs a layer, 5% of E8's prefill.)
__device__ void encode_e8_keys(const KVLayerView& kv, int32_t head, const uint32_t* page_of, const uint32_t* slot_of,
                               int32_t t0, int32_t nt) {
  constexpr int kTok = KV_BLOCK_TOKENS, kMaxRowChunks = kMaxD / 8;
  __shared__ __align__(16) float k[kTok][kMaxD], kr[kTok][kMaxD];  // [token - t0][channel]: k, then R k
  __shared__ float norm_of[kTok], scale_of[kTok];
  __shared__ uint16_t codes[kTok][kMaxD / 8];
  const int32_t d = kv.head_dim_k, T = kv.tile_dim, M = d / 8, tid = threadIdx.x, sub = tid & 7;
  const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
  const float* mu = st.mean ? st.mean + (size_t)head * d : nullptr;
  const float* scl = st.mean ? st.scale + (size_t)head * d : nullptr;  // centering's per-channel scale
  for (int32_t e = tid; e < nt * d; e += kThreads) {
    const int32_t t = e / d, c = e % d;
    const uint16_t* pg = reinterpret_cast<const uint16_t*>(kv.arena + (uint64_t)page_of[c / T] * kv.page_bytes);
    float x = bf16_to_f32(pg[(t0 + t) * T + c % T]);
    if (mu) x = __fdiv_rn(__fsub_rn(x, mu[c]), scl[c]);  // (k - mean) / scale, as the CPU rounds it
    k[t][c] = x;
  }
  __syncthreads();
  // k~[i] = <R_i, k> in e8_simd.h's e8_dot8 order (dot8_lanes'): 8 lanes per row, 32 rows per pass.
  static_assert(kThreads % 32 == 0, "whole warps: every lane takes part in the shuffles");
  for (int32_t i0 = 0; i0 < d; i0 += kThreads / 8) {
    const int32_t i = min(i0 + tid / 8, d - 1);  // past d: a repeat of row d - 1, not stored
    float r[kMaxRowChunks];
#pragma unroll
    for (int j = 0; j < kMaxRowChunks; ++j)
      if (8 * j < d) r[j] = st.rot[(size_t)i * d + 8 * j + sub];
    for (int t = 0; t < nt; ++t) {
      float l = 0.f;
#pragma unroll
      for (int j = 0; j < kMaxRowChunks; ++j)
        if (8 * j < d) l = __fadd_rn(l, __fmul_rn(r[j], k[t][8 * j + sub]));
      l = lanes8_sum(l);
      if (sub == 0 && i0 + tid / 8 < d) kr[t][i] = l;
    }
  }
  __syncthreads();
  // Norms: token t on the 8 lanes tid / 8 == t.
  static_assert(kThreads / 8 >= kTok, "an 8-lane group per token");
  {
    const int32_t t = min(tid / 8, nt - 1);
    const float nrm = sqrtf(dot8_lanes(kr[t], kr[t], d));
    if (tid < 8 * nt && sub == 0) {
      norm_of[t] = nrm;
      scale_of[t] = (nrm > 0.0f && isfinite(nrm)) ? __fdiv_rn(st.alpha, nrm) : 0.0f;
    }
  }
  __syncthreads();
  for (int32_t u = tid; u < nt * M; u += kThreads) {
    const int32_t t = u / M, blk = u % M;
    E8Vec8 x;
#pragma unroll
    for (int i = 0; i < E8_BLOCK; ++i) x.v[i] = __fmul_rn(kr[t][blk * E8_BLOCK + i], scale_of[t]);
    codes[t][blk] = (uint16_t)e8_encode_block(x).code;
  }
  __syncthreads();
  const int32_t nq = T / E8_QUAD_DIMS, QT = d / E8_QUAD_DIMS;
  for (int32_t u = tid; u < nt * QT; u += kThreads) {
    const int32_t t = u / QT, qt = u % QT, h = qt / nq, q = qt % nq;
    const uint16_t* ct = codes[t] + 4 * qt;
    const E8Quad quad = e8_quad_pack(ct[0], ct[1], ct[2], ct[3]);
    uint8_t* slot = kv_entry_ptr(kv, slot_of[h], 0);
    e8_st32(slot + e8_k_quad_offset(T, t0 + t, q), quad.proto);
    e8_st32(slot + e8_k_quad_offset(T, t0 + t, q) + 4, quad.signs);
  }
  for (int32_t u = tid; u < nt * kv.n_half; u += kThreads) {
    const int32_t t = u / kv.n_half, h = u % kv.n_half;
    e8_st32(kv_entry_ptr(kv, slot_of[h], 0) + e8_k_norm_offset(T, t0 + t), f32_to_bits(norm_of[t]));
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

// Grid (job, token group): E8 keys take KV_BLOCK_TOKENS / gridDim.y tokens of the job per
// thread block; the other jobs run in the blocks of group 0, the rest of their column leaving at once.
__global__ void __launch_bounds__(kThreads) finalize_kernel(KVLayerView kv, KVFinalizeJob* jobs, int64_t n_jobs) {
  pdl_begin();
  const int64_t i = blockIdx.x;
  const int32_t grp = blockIdx.y;
  KVFinalizeJob& j = jobs[i];
  const int32_t T = kv.tile_dim, tid = threadIdx.x;
  if (kv.format == KVFormat::E8 && !j.is_v) {
    // The halves of a (head, block) go together: encoded by the group's first job when all are
    // here. One half: the job is its group (the host never queues a tile twice). Two: the thread
    // block finds the group's jobs together (a prefill's launch has hundreds of jobs).
    __shared__ int32_t count, leader;
    __shared__ uint32_t page_of[2], slot_of[2];
    if (kv.n_half == 1) {
      if (tid == 0) {
        count = 1;
        leader = (int32_t)i;
        page_of[0] = j.raw_page;
        slot_of[0] = j.slot;
      }
    } else {
      if (tid == 0) {
        count = 0;
        leader = 0x7fffffff;
      }
      __syncthreads();
      for (int64_t k = tid; k < n_jobs; k += kThreads)
        if (!jobs[k].is_v && jobs[k].head == j.head && jobs[k].block == j.block) {
          atomicAdd(&count, 1);
          atomicMin(&leader, (int32_t)k);
          page_of[jobs[k].half & 1] = jobs[k].raw_page;
          slot_of[jobs[k].half & 1] = jobs[k].slot;
        }
    }
    __syncthreads();
    const bool fits = count == kv.n_half;
    const int32_t nt = KV_BLOCK_TOKENS / (int32_t)gridDim.y;
    if (fits && leader == i) encode_e8_keys(kv, j.head, page_of, slot_of, grp * nt, nt);
    if (tid == 0 && grp == 0) {
      j.fits = fits ? 1 : 0;
      j.escape_bytes = 0;
    }
    return;
  }
  if (grp != 0) return;
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
  // A decode step's few jobs: 2 tokens of a group per thread block (latency: more blocks, each
  // search on fewer warps); a prefill's hundreds: 16 (R loaded once a group; a 512-token prefill
  // of 8 kv-heads has 256 key groups, one wave at two blocks per SM, the value jobs' short blocks
  // beside them). GAACRT_CUDA_E8_FINALIZE_TOKENS=2|16 (read on every call) forces one, for the tests.
  const char* ft = std::getenv("GAACRT_CUDA_E8_FINALIZE_TOKENS");
  const int tokens = ft ? std::atoi(ft) : (n_jobs >= 64 ? KV_BLOCK_TOKENS : 2);
  const unsigned groups = tokens == 2 ? KV_BLOCK_TOKENS / 2 : 1u;
  static_assert(KV_BLOCK_TOKENS % 2 == 0, "a block's tokens in pairs");
  launch_kernel(finalize_kernel, dim3((unsigned)n_jobs, groups), kThreads, 0, stream, kv, jobs, n_jobs);
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gaacrt::cuda::lossy
