// attention.cu — decode and prefill attention over the paged KV cache on the GPU, for the BF16
// cache and the GAAC cache (kv/kv_view.h; shared/spec/gaac.md; DESIGN.md "Ops, graphs and the
// attention op"). The CPU reference is backends/cpu/attention.cpp.
//
// One kernel template per format; only the tile loader differs. A GAAC slot is decoded inside
// the kernel, by one warp per tile straight into shared memory (the lane map of
// codec/gaac/gaac_format.h: lane l owns a group column; a warp scan gives each lane its escape
// offsets), and a raw page is copied there; everything after the loader is the same code. GAAC
// is lossless, so both formats put the same BF16 bits in shared memory and the logits of a GAAC
// cache are bit-identical to a BF16 cache's on the GPU.
//
// Work split. Thread block (split, kv-head, sequence), 4 warps. A block of 16 keys and values
// of one kv-head is loaded once and used by every query row (query token, head of the GQA group)
// of the pass: rows are dealt round-robin to the warps (a GQA group of 4 = one row per warp), up
// to 16 per pass, each with an online softmax (max m, sum l, weighted sum acc, one lane holding
// every 32nd channel). Per row and block the 16 partial q·k sums of a lane are reduced across
// the warp by a transposing butterfly (16 shuffles for all 16 keys, leaving key lane/2 on each
// lane), so the softmax of a block is one exp per lane, not a serial chain per key.
//   * decode-sized sequences (at most 16 rows): the visible blocks are cut into chunks of 4
//     blocks aligned to absolute block indices (as the CPU's chunks are), and the chunks into n_split
//     contiguous ranges, one per thread block; a merge kernel combines the ranges in order.
//     n_split depends only on the batch's number of sequences and the GPU, never on the
//     format or on positions, so the partition is the same for BF16 and GAAC and the grid
//     does not change from token to token (a captured graph stays valid).
//   * prefill-sized sequences: thread block x takes passes x, x + n_split, ... of 16 rows over
//     the whole visible context, and writes its rows itself.
// Sequences (positions, counts, tables) are read from device memory.
#include <algorithm>
#include <cmath>

#include "codec/gaac/gaac_format.h"
#include "common/half.h"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "kv/gaac_codec.h"

namespace gaacrt::cuda {
namespace {

constexpr int kWarps = 4, kThreads = kWarps * kWarpSize;
constexpr int kRowsPerWarp = 4, kRowsPerPass = kWarps * kRowsPerWarp;  // 16
constexpr int kChunkBlocks = 4;                                         // 64 tokens
constexpr int kMaxDim = 2 * KV_TILE_MAX_DIM;                            // 256
constexpr int kPerLane = kMaxDim / kWarpSize;                           // channels per lane
constexpr int kMaxSplit = 256;

__device__ __forceinline__ float bf16f(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

// Plain stores into host-mapped memory (device atomics on it are not portable over PCIe); when
// several tiles are bad at once the report names one of them.
__device__ void record_corrupt(DeviceErrors* err, int32_t layer, int32_t head, int32_t block) {
  volatile DeviceErrors* e = err;
  e->layer = layer;
  e->head = head;
  e->block = block;
  __threadfence_system();
  e->code = 1;
}

// Raw BF16 page [16][td] -> smem rows [16][d] at column half*td (all threads of the block).
__device__ void copy_raw_tile(const uint16_t* __restrict__ page, int32_t td, int32_t d, int32_t half, uint16_t* dst) {
  if (td % 8 == 0) {
    const int n = KV_BLOCK_TOKENS * td / 8;  // 16-byte pieces, none crosses a row
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const int e = i * 8, row = e / td, col = e % td;
      *reinterpret_cast<uint4*>(dst + row * d + half * td + col) = reinterpret_cast<const uint4*>(page)[i];
    }
  } else {
    for (int e = threadIdx.x; e < KV_BLOCK_TOKENS * td; e += kThreads)
      dst[(e / td) * d + half * td + e % td] = page[e];
  }
}

// One warp decodes a GAAC slot into smem rows [16][d] at column half*td. Returns false (after
// recording the error) on a reserved tag or escapes beyond the capacity; nothing past the
// slot's fixed part and capacity is read.
__device__ bool decode_gaac_tile(const uint8_t* __restrict__ slot, int32_t td, int32_t d, int32_t half,
                                 uint32_t capacity, const uint8_t* b3, const uint8_t* b4, uint16_t* dst) {
  const int lane = threadIdx.x % kWarpSize, nl = gaac_lanes(td);
  uint32_t tags = 0;
  if (lane < nl) {
    const uint8_t* tp = slot + gaac_tags_offset(td) + 2 * lane;
    tags = (uint32_t)tp[0] | ((uint32_t)tp[1] << 8);
  }
  const GaacTagMasks m = gaac_tag_masks(tags);
  const bool bad = __any_sync(0xffffffffu, m.bad != 0);
  // Inclusive warp scan of (n_x | n_raw << 16): X bytes and R records before each lane.
  const uint32_t mine = __popc(m.x) | ((uint32_t)__popc(m.raw) << 16);
  uint32_t inc = mine;
  for (int o = 1; o < kWarpSize; o <<= 1) {
    const uint32_t t = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += t;
  }
  const uint32_t total = __shfl_sync(0xffffffffu, inc, kWarpSize - 1);
  const uint32_t n_x = total & 0xFFFFu, n_raw = total >> 16;
  if (bad || n_x + 4u * n_raw > capacity) return false;
  const uint32_t excl = inc - mine;
  if (lane < nl)
    gaac_decode_lane(slot, td, lane, excl & 0xFFFFu, n_x + 4u * (excl >> 16), b3, b4, 0xFFFFu, dst + half * td, d);
  return true;
}

struct SeqRange {
  int32_t b_lo, b_hi;  // blocks to read
};

// Visible blocks of query rows [i_first, i_last] of sequence s.
__device__ SeqRange visible_blocks(const AttnSeq& s, const AttentionArgs& a, int32_t i_first, int32_t i_last) {
  const int32_t p0 = s.pos0 + i_first, p1 = s.pos0 + i_last;
  const int32_t lo = a.sliding_window > 0 ? max(0, p0 - a.sliding_window + 1) : 0;
  return {lo / KV_BLOCK_TOKENS, p1 / KV_BLOCK_TOKENS + 1};
}

template <bool kGaac>
__global__ void __launch_bounds__(kThreads)
attention_kernel(KVLayerView kv, AttentionArgs a, const AttnSeq* __restrict__ seqs, const float* __restrict__ q,
                 float* __restrict__ out, float* __restrict__ part, int32_t n_split, DeviceErrors* err) {
  __shared__ __align__(16) uint16_t kt[KV_BLOCK_TOKENS * kMaxDim];
  __shared__ __align__(16) uint16_t vt[KV_BLOCK_TOKENS * kMaxDim];
  const int32_t kvh = blockIdx.y, split = blockIdx.x, warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const AttnSeq s = seqs[blockIdx.z];
  const int32_t G = a.n_head / kv.n_head_kv, dk = kv.head_dim_k, dv = kv.head_dim_v, td = kv.tile_dim;
  const int32_t n_rows = s.n_q * G;
  const bool split_mode = n_rows <= kRowsPerPass;
  const GaacKVLayer* st = kGaac ? static_cast<const GaacKVLayer*>(kv.codec) : nullptr;

  for (int32_t r0 = split_mode ? 0 : split * kRowsPerPass; r0 < n_rows;
       r0 += split_mode ? n_rows : n_split * kRowsPerPass) {
    SeqRange range = visible_blocks(s, a, r0 / G, min(n_rows - 1, r0 + kRowsPerPass - 1) / G);
    if (split_mode) {  // this block's share of the chunks
      const int32_t c0 = range.b_lo / kChunkBlocks, c1 = (range.b_hi - 1) / kChunkBlocks + 1;
      const int32_t per = (c1 - c0 + n_split - 1) / n_split;
      const int32_t b0 = (c0 + split * per) * kChunkBlocks, b1 = (c0 + (split + 1) * per) * kChunkBlocks;
      range.b_lo = max(range.b_lo, b0);
      range.b_hi = min(range.b_hi, b1);
    }
    // This warp's rows: query registers and online-softmax state.
    float qr[kRowsPerWarp][kPerLane], acc[kRowsPerWarp][kPerLane], m[kRowsPerWarp], l[kRowsPerWarp];
    int32_t pos[kRowsPerWarp], lo[kRowsPerWarp];
#pragma unroll
    for (int k = 0; k < kRowsPerWarp; ++k) {
      const int32_t r = r0 + k * kWarps + warp;
      const bool valid = r < n_rows;
      const int32_t i = valid ? r / G : 0, g = valid ? r % G : 0;
      pos[k] = valid ? s.pos0 + i : -1;  // -1: no key is visible
      lo[k] = a.sliding_window > 0 ? max(0, pos[k] - a.sliding_window + 1) : 0;
      const float* qv = q + ((int64_t)(s.q_begin + i) * a.n_head + kvh * G + g) * dk;
#pragma unroll
      for (int c = 0; c < kPerLane; ++c) {
        const int ch = lane + c * kWarpSize;
        qr[k][c] = valid && ch < dk ? qv[ch] : 0.f;
        acc[k][c] = 0.f;
      }
      m[k] = -INFINITY;
      l[k] = 0.f;
    }

    for (int32_t b = range.b_lo; b < range.b_hi; ++b) {
      __syncthreads();  // the previous block's tiles are no longer read
      bool ok = true;
      // ---- tile loader: the only format-dependent part ----
      for (int32_t t = 0; t < 2 * kv.n_half; ++t) {
        const int32_t is_v = t / kv.n_half, half = t % kv.n_half;
        const uint32_t e = s.table[kv_entry_index(kv, kvh, is_v, half, b)];
        uint16_t* dst = is_v ? vt : kt;
        const int32_t d = is_v ? dv : dk;
        if (e == KV_ENTRY_EMPTY) {  // released (sliding window): never visible here, keep it finite
          for (int i = threadIdx.x; i < KV_BLOCK_TOKENS * td; i += kThreads) dst[(i / td) * d + half * td + i % td] = 0;
        } else if (kGaac && kv_entry_is_slot(e)) {
          if (warp == t % kWarps) {
            const int64_t off = (int64_t)kvh * d + (int64_t)half * td;
            if (!decode_gaac_tile(kv_entry_ptr(kv, e, is_v), td, d, half, st->capacity[is_v],
                                  st->bases[is_v][0] + off, st->bases[is_v][1] + off, dst)) {
              ok = false;
              if (lane == 0) record_corrupt(err, kv.layer, kvh, b);
            }
          }
        } else {
          copy_raw_tile(reinterpret_cast<const uint16_t*>(kv.arena + (uint64_t)e * kv.page_bytes), td, d, half, dst);
        }
      }
      // A corrupt tile is reported and never read (the skip is uniform across the block).
      if (!__syncthreads_and(ok)) continue;
      // ---- scores, online softmax, weighted values: identical for every format ----
#pragma unroll
      for (int k = 0; k < kRowsPerWarp; ++k) {
        const int32_t j0 = max(b * KV_BLOCK_TOKENS, lo[k]), j1 = min(b * KV_BLOCK_TOKENS + KV_BLOCK_TOKENS, pos[k] + 1);
        if (j0 >= j1) continue;  // warp-uniform
        // Partial q·k of this lane's channels for all 16 keys (rows past the newest token of a
        // raw page may hold NaN patterns: their scores are replaced below, their values skipped).
        float pd[KV_BLOCK_TOKENS];
#pragma unroll
        for (int j = 0; j < KV_BLOCK_TOKENS; ++j) {
          float dot = 0.f;
#pragma unroll
          for (int c = 0; c < kPerLane; ++c) {
            const int ch = lane + c * kWarpSize;
            if (ch < dk) dot += qr[k][c] * bf16f(kt[j * dk + ch]);
          }
          pd[j] = dot;
        }
        // Transposing butterfly: after offsets 16, 8, 4, 2 lane holds key (lane >> 1) summed over
        // 16 lanes; offset 1 completes the sum over the warp.
#pragma unroll
        for (int o = 16, n = KV_BLOCK_TOKENS / 2; o >= 2; o >>= 1, n >>= 1) {
          const bool upper = lane & o;
#pragma unroll
          for (int i = 0; i < n; ++i) {
            const float send = upper ? pd[i] : pd[i + n], keep = upper ? pd[i + n] : pd[i];
            pd[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
          }
        }
        const int32_t jj = lane >> 1, key = b * KV_BLOCK_TOKENS + jj;
        float sc = (pd[0] + __shfl_xor_sync(0xffffffffu, pd[0], 1)) * a.scale;
        if (a.softcap > 0.f) sc = a.softcap * tanhf(sc / a.softcap);
        if (key < j0 || key >= j1) sc = -INFINITY;
        float bm = sc;
        for (int o = 16; o > 0; o >>= 1) bm = fmaxf(bm, __shfl_xor_sync(0xffffffffu, bm, o));
        const float mx = fmaxf(m[k], bm);      // finite: the block has a visible key
        const float corr = expf(m[k] - mx);     // 0 on the first visible block (m = -inf)
        const float w = expf(sc - mx);          // 0 for invisible keys
        float ws = w;                           // sum over the 16 keys (each sits on two lanes)
        for (int o = 16; o > 1; o >>= 1) ws += __shfl_xor_sync(0xffffffffu, ws, o);
        l[k] = l[k] * corr + ws;
#pragma unroll
        for (int c = 0; c < kPerLane; ++c) acc[k][c] *= corr;
#pragma unroll
        for (int j = 0; j < KV_BLOCK_TOKENS; ++j) {
          const int32_t kj = b * KV_BLOCK_TOKENS + j;
          if (kj < j0 || kj >= j1) continue;  // warp-uniform
          const float wj = __shfl_sync(0xffffffffu, w, 2 * j);
#pragma unroll
          for (int c = 0; c < kPerLane; ++c) {
            const int ch = lane + c * kWarpSize;
            if (ch < dv) acc[k][c] += wj * bf16f(vt[j * dv + ch]);
          }
        }
        m[k] = mx;
      }
    }

    // ---- results: final rows, or this split's partial state for the merge kernel ----
#pragma unroll
    for (int k = 0; k < kRowsPerWarp; ++k) {
      const int32_t r = r0 + k * kWarps + warp;
      if (r >= n_rows) continue;
      if (split_mode && n_split > 1) {
        float* p = part + ((((int64_t)blockIdx.z * kv.n_head_kv + kvh) * n_split + split) * kRowsPerPass + r) * (dv + 2);
        if (lane == 0) {
          p[0] = m[k];
          p[1] = l[k];
        }
#pragma unroll
        for (int c = 0; c < kPerLane; ++c) {
          const int ch = lane + c * kWarpSize;
          if (ch < dv) p[2 + ch] = acc[k][c];
        }
      } else {
        const int32_t i = r / G, g = r % G;
        float* o = out + ((int64_t)(s.q_begin + i) * a.n_head + kvh * G + g) * dv;
        const float inv = l[k] > 0.f ? 1.f / l[k] : 0.f;
#pragma unroll
        for (int c = 0; c < kPerLane; ++c) {
          const int ch = lane + c * kWarpSize;
          if (ch < dv) o[ch] = acc[k][c] * inv;
        }
      }
    }
  }
}

// Combines the n_split partial states of each decode-sized row, in split order.
__global__ void attention_merge_kernel(int32_t n_head, int32_t n_head_kv, int32_t dv, const AttnSeq* __restrict__ seqs,
                                       const float* __restrict__ part, int32_t n_split, float* __restrict__ out) {
  const int32_t r = blockIdx.x, kvh = blockIdx.y;
  const AttnSeq s = seqs[blockIdx.z];
  const int32_t G = n_head / n_head_kv, n_rows = s.n_q * G;
  if (n_rows > kRowsPerPass || r >= n_rows) return;
  const int64_t stride = (int64_t)kRowsPerPass * (dv + 2);
  const float* p0 = part + (((int64_t)blockIdx.z * n_head_kv + kvh) * n_split * kRowsPerPass + r) * (dv + 2);
  float mx = -INFINITY;
  for (int32_t sp = 0; sp < n_split; ++sp) mx = fmaxf(mx, p0[sp * stride]);
  float l = 0.f;
  for (int32_t sp = 0; sp < n_split; ++sp) {
    const float pm = p0[sp * stride];
    if (pm != -INFINITY) l += p0[sp * stride + 1] * expf(pm - mx);
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;
  float* o = out + ((int64_t)(s.q_begin + r / G) * n_head + kvh * G + r % G) * dv;
  for (int32_t c = threadIdx.x; c < dv; c += blockDim.x) {
    float v = 0.f;
    for (int32_t sp = 0; sp < n_split; ++sp) {
      const float pm = p0[sp * stride];
      if (pm != -INFINITY) v += p0[sp * stride + 2 + c] * expf(pm - mx);
    }
    o[c] = v * inv;
  }
}

}  // namespace

void CudaBackend::attention(const KVLayerView& kv, const AttentionArgs& args, const AttnSeq* seqs, int32_t n_seqs,
                            const float* q, float* out) {
  if (n_seqs <= 0) return;
  if (kv.format != KVFormat::BF16 && kv.format != KVFormat::GAAC)
    throw Error("backend", "not_implemented",
                strfmt("cuda attention: cache format %d is not implemented on CUDA (bf16, gaac are)", (int)kv.format));
  if (kv.n_head_kv <= 0 || args.n_head % kv.n_head_kv)
    throw Error("backend", "invalid_argument",
                strfmt("cuda attention: %d query heads are not a multiple of %d kv-heads", args.n_head, kv.n_head_kv));
  if (kv.head_dim_k > kMaxDim || kv.head_dim_v > kMaxDim || kv.head_dim_k != kv.n_half * kv.tile_dim ||
      kv.head_dim_v != kv.n_half * kv.tile_dim)
    throw Error("backend", "invalid_argument",
                strfmt("cuda attention: head dims %d/%d (tile %d x %d) unsupported (at most %d, whole tiles)",
                       kv.head_dim_k, kv.head_dim_v, kv.n_half, kv.tile_dim, kMaxDim));
  if (n_seqs > 65535) throw Error("backend", "invalid_argument", strfmt("cuda attention: %d sequences", n_seqs));
  // About 8 thread blocks per multiprocessor for a decode step (several in flight per SM hide the
  // tile loads' latency); a function of the batch shape only.
  const int32_t units = n_seqs * kv.n_head_kv;
  const int32_t n_split = std::max(1, std::min(kMaxSplit, (8 * info_.multiprocessors + units - 1) / units));
  float* part = nullptr;
  if (n_split > 1)
    part = static_cast<float*>(scratch((size_t)units * n_split * kRowsPerPass * (kv.head_dim_v + 2) * sizeof(float)));
  const dim3 grid(n_split, kv.n_head_kv, n_seqs);
  if (kv.format == KVFormat::GAAC)
    attention_kernel<true><<<grid, kThreads, 0, stream_>>>(kv, args, seqs, q, out, part, n_split, dev_errors_);
  else
    attention_kernel<false><<<grid, kThreads, 0, stream_>>>(kv, args, seqs, q, out, part, n_split, dev_errors_);
  GAACRT_CUDA_CHECK(cudaGetLastError());
  if (n_split > 1) {
    attention_merge_kernel<<<dim3(kRowsPerPass, kv.n_head_kv, n_seqs), 128, 0, stream_>>>(
        args.n_head, kv.n_head_kv, kv.head_dim_v, seqs, part, n_split, out);
    GAACRT_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace gaacrt::cuda
