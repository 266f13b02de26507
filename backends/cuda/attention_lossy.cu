// attention_lossy.cu — attention over E8 k2v2, q8 and kivi2 caches on CUDA cores: compressed
// slots and the BF16 raw window / tail in one online softmax (CPU reference:
// backends/cpu/attention.cpp with backends/cpu/kv_finalize_lossy.cpp's decode_lossy_tile).
//
// Work split (as kernels/attention_mma.cuh): a row is (query token, head of the GQA group); a
// warp owns R rows (R = 1, 2 or 4, from the group size) and streams 16-token blocks through a
// 3-deep cp.async pipeline of its own shared buffers (slots only; raw BF16 pages are read from
// global memory, they are the few newest blocks). Per block:
//   * scores: lane (j, tg) holds 8 channels j of the R rows' queries in registers and scores the
//     tokens tg, tg + 32/NBP, ... of the block; E8 decodes each 16-bit code once (1 KiB packed
//     table in shared memory, e8_codebook.h's nibble decode) and dots it with all R rows (GQA),
//     in the rotated basis (queries rotated by the layer's R; centering adds q~ . mean~); the
//     partial sums meet in a transposing butterfly reduction;
//   * online softmax per row; values decoded per lane's channels and accumulated.
// Decode-sized sequences (rows <= 16): the visible blocks are split over n_split thread blocks
// (4 warps each dealing blocks round-robin), the warps merge in shared memory, each thread block
// writes a partial (m, l, O) and a second kernel merges the splits. Larger (prefill) sequences:
// each warp takes an R-row tile over its whole visible range and writes its rows itself.
// Results equal the CPU's to float rounding (summation orders differ); tests/test_cuda_lossy.py.
// E8 decode steps of head size 32, 64 or 128 run on the tensor cores instead
// (kernels/attention_e8_mma.cuh, with the queries rotated here).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "cuda_common.h"
#include "kernels/attention_lossy.cuh"
#include "lossy_ops.h"

namespace gaacrt::cuda::lossy {
namespace {

using namespace detail;
static_assert(kSplitRows == kRotatedRows, "the rotated queries' rows are the decode row group");

// E8: q~ = R q for the rows of each (sequence, kv-head), P.rot_rows at most (decode steps: 16).
// Grid (kv-heads, sequences, d / 32 x row slices): a thread block makes 32 dims of q~ for the
// 16-row chunks of its slice of kSliceRows rows; thread (i, part) sums row i of R over the column
// chunks (4 floats) part, part + 4, ... against every row of a chunk, and the four parts meet by
// shuffles. All of a thread's loads of R are independent (one latency, not one per chunk: the
// first version, a loop of load-then-store through shared memory, took 55 µs), and issued before
// the wait for the previous kernel (R is the layer's constant, q is not): what remains after it is
// the load of q and the arithmetic.
//   A chunk's rows are staged by whole rows (warp w: rows w, w + 4, ...; a lane: 4 consecutive
// floats, 16-byte loads), their source found once per row; rows past the chunk's last are zeros,
// so the products run over a fixed 4 or 16 rows with no test per row. (The first version found
// every element's row and column by integer divisions by d and G and tested each row against the
// chunk's end: ~3,000 instructions a chunk per thread where the 512 FMAs are the work; 2.6 ms of
// one 512-token prefill of the 8B shape, 4% of it.)
constexpr int kSliceRows = 128, kRotParts = 4;  // rotate_kernel: threads per row of R

// y[r] += R[i] . qs[r] over the thread's column chunks, rows 0 .. kR-1.
template <int kR, int kMaxD, int kMaxChunks>
__device__ __forceinline__ void rotate_rows(const float4 (&rv)[kMaxChunks], const float (*qs)[kMaxD], int part,
                                            int32_t d, float (&y)[kSplitRows]) {
#pragma unroll
  for (int j = 0; j < kMaxChunks; ++j) {
    const int32_t c = 4 * (part + kRotParts * j);
    if (c >= d) break;  // uniform
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const float4 qv = *reinterpret_cast<const float4*>(&qs[r][c]);
      y[r] = __fmaf_rn(rv[j].x, qv.x, y[r]);
      y[r] = __fmaf_rn(rv[j].y, qv.y, y[r]);
      y[r] = __fmaf_rn(rv[j].z, qv.z, y[r]);
      y[r] = __fmaf_rn(rv[j].w, qv.w, y[r]);
    }
  }
}

// Whether any block of the sequence, kv-head kvh, holds a compressed K tile (block-uniform; every
// block up to the newest, a superset of what any split sees). From the newest block back,
// kThreads entries at a time: past the raw window the first chunk finds one.
__device__ bool sequence_has_slots(const KVLayerView& kv, const AttnSeq& s, int32_t kvh) {
  const uint32_t* kent = s.table + kv_entry_index(kv, kvh, 0, 0, 0);
  for (int32_t end = (s.pos0 + s.n_q + KV_BLOCK_TOKENS - 1) / KV_BLOCK_TOKENS; end > 0; end -= kThreads) {
    const int32_t b = end - 1 - (int32_t)threadIdx.x;
    if (__syncthreads_or(b >= 0 && kv_entry_is_slot(__ldg(kent + b)))) return true;
  }
  return false;
}

// kMaxD: 128 for head sizes up to 128, 256 (whose R row takes twice the registers) above; at 128
// the kernel fits four thread blocks per SM (a few spills, none in the product loop).
template <int kMaxD>
__global__ void __launch_bounds__(kThreads, kMaxD <= 128 ? 4 : 1) rotate_kernel(Args P) {
  constexpr int kDims = 32, kParts = kRotParts, kMaxChunks = kMaxD / 4 / kParts, kLaneCols = kMaxD / 4 / 32;
  __shared__ __align__(16) float qs[kSplitRows][kMaxD];
  const KVLayerView& kv = P.kv;
  const int32_t d = kv.head_dim_k, n_dc = (d + kDims - 1) / kDims;
  const int32_t kvh = blockIdx.x, seq = blockIdx.y, dc = blockIdx.z % n_dc, slice = blockIdx.z / n_dc;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
  const int part = tid % kParts;
  const int32_t i = dc * kDims + tid / kParts;
  float4 rv[kMaxChunks];
  auto load_r = [&] {
    if (i < d) {
      const float4* Ri = reinterpret_cast<const float4*>(st.rot + (size_t)i * d);
#pragma unroll
      for (int j = 0; j < kMaxChunks; ++j)
        if (4 * (part + kParts * j) < d) rv[j] = Ri[part + kParts * j];
    }
  };
  // Slice 0's blocks load R before the wait for the previous kernel; a later slice's first learn
  // whether their sequence reaches them (most of a batch's sequences are short).
  if (slice == 0) load_r();
  // Centering: q~ = R (scale * q); this lane's columns of the scale, 4 * (lane + 32 u) + 0..3.
  float4 sc[kLaneCols];
#pragma unroll
  for (int u = 0; u < kLaneCols; ++u) {
    const int32_t c = 4 * (lane + 32 * u);
    sc[u] = st.scale && c < d ? *reinterpret_cast<const float4*>(st.scale + (size_t)kvh * d + c)
                              : make_float4(1.f, 1.f, 1.f, 1.f);
  }
  // A sequence with no compressed block yet (a short context, all of it inside the raw window)
  // needs no rotated queries: the tensor-core kernel reads them only for a split holding a slot,
  // and the CUDA-core one (attention_lossy.cuh) copies them but uses them only against slots.
  // The block table was written before the step, so the test runs before the wait; the wait
  // stays, so that the attention launch after this one still starts after the Q/K/V kernel.
  const AttnSeq s = P.seqs[seq];
  const bool rotate = sequence_has_slots(kv, s, kvh);
  pdl_begin();
  const int32_t G = P.a.n_head / kv.n_head_kv, n_rows = s.n_q * G;
  // (n_rows > rot_rows: none, rot_rows covers the launch's largest sequence.)
  if (!rotate || n_rows > P.rot_rows || slice * kSliceRows >= n_rows) return;
  if (slice > 0) load_r();
  float* dst = const_cast<float*>(P.q_rot) + ((size_t)seq * kv.n_head_kv + kvh) * P.rot_rows * d;
  const int32_t r_end = min(n_rows, (slice + 1) * kSliceRows);
  const bool q16 = ((uintptr_t)P.q & 15u) == 0;  // 16-byte loads of q (rows are d floats, a multiple of 32)
  for (int32_t rb = slice * kSliceRows; rb < r_end; rb += kSplitRows) {
    const int32_t nr = min(kSplitRows, r_end - rb);  // rows of this chunk
    const int rows = nr <= 4 ? 4 : kSplitRows;       // rows computed (a decode step's group: 4)
    __syncthreads();  // the previous chunk's reads of qs are done
    // Every load of the chunk first, then the stores (a store waiting for its load would hold
    // back the next row's load: one L2 trip per row instead of one per chunk).
    constexpr int kRowSteps = kSplitRows / (kThreads / 32);
    float4 x[kRowSteps][kLaneCols];
#pragma unroll
    for (int k = 0; k < kRowSteps; ++k) {
      const int r = warp + k * (kThreads / 32);
      const int32_t row = rb + min(r, nr - 1);
      const float* src = P.q + ((size_t)(s.q_begin + row / G) * P.a.n_head + kvh * G + row % G) * d;
#pragma unroll
      for (int u = 0; u < kLaneCols; ++u) {
        const int32_t c = 4 * (lane + 32 * u);
        x[k][u] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (r < nr && c < d)
          x[k][u] = q16 ? *reinterpret_cast<const float4*>(src + c)
                        : make_float4(src[c], src[c + 1], src[c + 2], src[c + 3]);
      }
    }
#pragma unroll
    for (int k = 0; k < kRowSteps; ++k) {
      const int r = warp + k * (kThreads / 32);
      if (r >= rows) break;  // uniform
#pragma unroll
      for (int u = 0; u < kLaneCols; ++u) {
        const int32_t c = 4 * (lane + 32 * u);
        if (c < d)  // (lanes past d below 128: nothing to stage)
          *reinterpret_cast<float4*>(&qs[r][c]) =
              make_float4(__fmul_rn(x[k][u].x, sc[u].x), __fmul_rn(x[k][u].y, sc[u].y),
                          __fmul_rn(x[k][u].z, sc[u].z), __fmul_rn(x[k][u].w, sc[u].w));
      }
    }
    __syncthreads();
    float y[kSplitRows];
#pragma unroll
    for (int r = 0; r < kSplitRows; ++r) y[r] = 0.f;
    if (i < d) {
      if (rows == 4)
        rotate_rows<4, kMaxD>(rv, qs, part, d, y);
      else
        rotate_rows<kSplitRows, kMaxD>(rv, qs, part, d, y);
    }
#pragma unroll
    for (int r = 0; r < kSplitRows; ++r) {
      if (r >= rows) break;  // uniform
      y[r] += __shfl_xor_sync(kFull, y[r], 1);
      y[r] += __shfl_xor_sync(kFull, y[r], 2);
    }
    if (part == 0 && i < d)
#pragma unroll
      for (int r = 0; r < kSplitRows; ++r)
        if (r < nr) dst[(size_t)(rb + r) * d + i] = y[r];
  }
}

// Decode-sized sequences: merges the n_split partials of one row per thread block (grid z =
// row): warp 0 turns the splits' maxima into weights, then every channel sums its column.
__global__ void __launch_bounds__(kThreads) reduce_kernel(Args P) {
  pdl_begin();
  __shared__ float f[kMaxSplit];
  __shared__ float sL;
  const KVLayerView& kv = P.kv;
  const int32_t kvh = blockIdx.x, seq = blockIdx.y, r = blockIdx.z, dv = kv.head_dim_v, rs = dv + 2;
  const AttnSeq s = P.seqs[seq];
  const int32_t G = P.a.n_head / kv.n_head_kv, n_rows = s.n_q * G;
  if (n_rows > kSplitRows || r >= n_rows) return;
  const int32_t ns = P.n_split, stride = kSplitRows * rs;
  const float* pu = P.part + (((size_t)seq * kv.n_head_kv + kvh) * ns * kSplitRows + r) * rs;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float M = -INFINITY;
    for (int32_t sp = lane; sp < ns; sp += 32) M = fmaxf(M, __ldcg(pu + (size_t)sp * stride + dv));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(kFull, M, o));
    float L = 0.f;
    for (int32_t sp = lane; sp < ns; sp += 32) {
      const float m = __ldcg(pu + (size_t)sp * stride + dv);
      const float w = (m == -INFINITY || M == -INFINITY) ? 0.f : expf(m - M);
      f[sp] = w;
      L += w * __ldcg(pu + (size_t)sp * stride + dv + 1);
    }
    L = warp_sum_f32(L);
    if (lane == 0) sL = L;
  }
  __syncthreads();
  const float L = sL, inv = L > 0.f ? 1.f / L : 0.f;
  float* o = P.out + ((size_t)(s.q_begin + r / G) * P.a.n_head + kvh * G + r % G) * dv;
  for (int32_t c = threadIdx.x; c < dv; c += kThreads) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    int32_t sp = 0;
    for (; sp + 4 <= ns; sp += 4)
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[k] = __fmaf_rn(__ldcg(pu + (size_t)(sp + k) * stride + c), f[sp + k], acc[k]);
    for (; sp < ns; ++sp) acc[0] = __fmaf_rn(__ldcg(pu + (size_t)sp * stride + c), f[sp], acc[0]);
    o[c] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) * inv;
  }
}

// Shared bytes of one thread block of Attn<F, R, T, NH> (the same formula as its smem_bytes()).
size_t smem_for(KVFormat f, int R, int T, int NH) {
  const uint32_t sk = f == KVFormat::E8 ? e8_k_slot_bytes(T) : (f == KVFormat::Q8 ? q8_slot_bytes(T) : kivi2_k_slot_bytes(T));
  const uint32_t sv = f == KVFormat::Q8 ? q8_slot_bytes(T) : v2_slot_bytes(T);
  const size_t D = (size_t)T * NH, warp = 2 * R * D * 4 + 2 * 16 * R * 4 + (size_t)kStages * NH * (sk + sv);
  return (size_t)E8_N_PROTO * 4 + kW * warp + (size_t)kW * R * (D + 2) * 4;
}

int smem_per_sm() {
  int dev = 0;
  GAACRT_CUDA_CHECK(cudaGetDevice(&dev));
  return device_attr<cudaDevAttrMaxSharedMemoryPerMultiprocessor>(dev);
}

// Thread blocks per (sequence, kv-head): at most one wave of the blocks an SM holds (registers:
// the kernel's launch bounds; shared memory: its stages), since one block more than a wave
// leaves a second, nearly empty wave that doubles the time.
int32_t n_split_for(const KVLayerView& kv, const AttentionArgs& a, int32_t n_seqs, int sms) {
  const int32_t G = a.n_head / kv.n_head_kv, R = G == 1 ? 1 : (G == 2 ? 2 : 4), T = kv.tile_dim, NH = kv.n_half;
  const int reg_blocks = NH == 2 ? 2 : ((R == 4 && T >= 96) ? 3 : kMinBlocks);
  const int smem_blocks = std::max(1, (int)(smem_per_sm() / (smem_for(kv.format, R, T, NH) + 1024)));
  const int32_t units = n_seqs * kv.n_head_kv, per_sm = std::min(reg_blocks, smem_blocks);
  return std::max(1, std::min(kMaxSplit, (per_sm * sms) / units));
}

}  // namespace

namespace {
int64_t rot_rows_for(const KVLayerView& kv, const AttentionArgs& a) {
  const int64_t rows = (int64_t)std::max(a.max_q, 0) * (a.n_head / kv.n_head_kv);
  return std::max<int64_t>(kRotatedRows, (rows + kRotatedRows - 1) / kRotatedRows * kRotatedRows);
}
}  // namespace

bool e8_prefill_on_mma(const KVLayerView& kv, const AttentionArgs& a, int32_t n_seqs) {
  const char* e = std::getenv("GAACRT_CUDA_E8_MMA_PREFILL");
  return e8_mma_ok(kv) && a.max_q > 0 && !(e && e[0] == '0') &&
         (size_t)n_seqs * kv.n_head_kv * rot_rows_for(kv, a) * kv.head_dim_k * sizeof(float) <= kMaxRotBytes;
}

int32_t e8_rot_rows(const KVLayerView& kv, const AttentionArgs& a, int32_t n_seqs) {
  return e8_prefill_on_mma(kv, a, n_seqs) ? (int32_t)rot_rows_for(kv, a) : kRotatedRows;
}

size_t attention_scratch_bytes(const KVLayerView& kv, const AttentionArgs& a, int32_t n_seqs, int sms) {
  const int32_t n_split = n_split_for(kv, a, n_seqs, sms);
  const size_t units = (size_t)n_seqs * kv.n_head_kv;
  return (units * e8_rot_rows(kv, a, n_seqs) * kv.head_dim_k + units * n_split * kSplitRows * (kv.head_dim_v + 2)) *
         sizeof(float);
}

bool e8_mma_ok(const KVLayerView& kv) {
  static const bool enabled = [] {
    const char* e = std::getenv("GAACRT_CUDA_E8_MMA");
    return !(e && e[0] == '0');
  }();
  const int32_t T = kv.tile_dim;
  return enabled && kv.format == KVFormat::E8 && kv.n_half == 1 && (T == 32 || T == 64 || T == 128) &&
         kv.head_dim_k == T && kv.head_dim_v == T && kv.slot_bytes[0] == e8_k_slot_bytes(T) &&
         kv.slot_bytes[1] == e8_v_slot_bytes(T);
}

void attention(const KVLayerView& kv, const AttentionArgs& a, const AttnSeq* seqs, int32_t n_seqs, const float* q,
               float* out, void* scratch, int sms, int max_smem, cudaStream_t stream, bool decode_on_mma) {
  const int32_t T = kv.tile_dim;
  if (T < 32 || T > KV_TILE_MAX_DIM || T % 32 || kv.n_half < 1 || kv.n_half > 2 || (kv.n_half == 2 && T != 128) ||
      kv.head_dim_k != T * kv.n_half || kv.head_dim_v != T * kv.n_half)
    throw Error("backend", "invalid_argument",
                strfmt("cuda attention: lossy cache head dims %d/%d (tile %d x %d) unsupported (32, 64, 96, 128, 256)",
                       kv.head_dim_k, kv.head_dim_v, kv.n_half, T));
  check_e8_view(kv, T, "attention");
  if (n_seqs > 65535) throw Error("backend", "invalid_argument", strfmt("cuda attention: %d sequences", n_seqs));
  const int32_t n_split = n_split_for(kv, a, n_seqs, sms);
  const size_t units = (size_t)n_seqs * kv.n_head_kv;
  // (The prefill rows only for the tensor-core kernel: the CUDA-core one rotates its own.)
  const bool prefill_on_mma = decode_on_mma && e8_prefill_on_mma(kv, a, n_seqs);
  const int32_t rot_rows = prefill_on_mma ? e8_rot_rows(kv, a, n_seqs) : kRotatedRows;
  float* q_rot = static_cast<float*>(scratch);
  float* part = q_rot + units * rot_rows * kv.head_dim_k;
  Args P{kv, a, seqs, q, q_rot, out, part, n_split, 0, 0, decode_on_mma ? 1 : 0, rot_rows};
  const int32_t G = a.n_head / kv.n_head_kv;
  // (The tensor-core kernel reads its rotated queries from here too.)
  if (kv.format == KVFormat::E8) {
    const unsigned slices = (unsigned)((rot_rows + kSliceRows - 1) / kSliceRows);
    const dim3 grid(kv.n_head_kv, n_seqs, (kv.head_dim_k + 31) / 32 * slices);
    launch_kernel(kv.head_dim_k <= 128 ? rotate_kernel<128> : rotate_kernel<256>, grid, kThreads, 0, stream, P);
  }
  // Decode steps only (max_q known and small), or every sequence on the tensor cores: the
  // tensor-core kernel has them all.
  if (decode_on_mma && a.max_q > 0 && ((int64_t)a.max_q * G <= kSplitRows || prefill_on_mma)) return;
  // Prefill-sized sequences: a thread block per kW row tiles of R rows.
  const int32_t R = G == 1 ? 1 : (G == 2 ? 2 : 4);
  const int64_t max_rows = (int64_t)std::max(a.max_q, 0) * G;
  const dim3 grid(attention_grid_x(n_split, max_rows, kSplitRows, R * kW), kv.n_head_kv, n_seqs);
  switch (kv.format) {
    case KVFormat::E8: launch_e8(kv, G, P, grid, max_smem, stream); break;
    case KVFormat::Q8: launch_q8(kv, G, P, grid, max_smem, stream); break;
    default: launch_kivi2(kv, G, P, grid, max_smem, stream); break;
  }
  if (!decode_on_mma) launch_kernel(reduce_kernel, dim3(kv.n_head_kv, n_seqs, kSplitRows), kThreads, 0, stream, P);
  GAACRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gaacrt::cuda::lossy
