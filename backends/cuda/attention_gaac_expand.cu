// attention_gaac_expand.cu — a GAAC cache's prefill-sized attention through BF16 pages: every
// visible tile of the layer decoded once into a scratch arena of raw pages, then the BF16 cache's
// own launch (attention.cu) over that arena. The issue allows it ("expanding one bounded chunk of
// it at a time into scratch"); the bound here is one layer of the launch's sequences.
//
// Why: a prefill-sized launch gives a thread block one row group of 64 query rows, and every row
// group of a kv-head streams all of that kv-head's visible blocks. In the GAAC kernels each thread
// block decodes its stream itself, so a 512-token prefill of a 4-query-head GQA group decodes every
// tile 32 times (2,048 rows / 64); the BF16 kernel only copies. Decoded once here, the launch
// costs the BF16 launch plus one pass over the tiles (a warp per tile: validate, decode with
// gaac_lane.cuh, 16-byte stores), and its logits are the BF16 cache's bit for bit by construction:
// the same kernel, splits and sums over the same values.
//
// Measured (H100, Llama-3.1-8B shape, sixteenth session; `STAGES="build expand" bash
// bench/gpu_check_visit.sh`): pp512 after 32K, GAAC 3,336 / 3,339 / 3,358 tok/s against 2,335 /
// 2,343 / 2,343 with GAACRT_CUDA_GAAC_EXPAND=0 (+43%; BF16 3,460-3,488, so GAAC now 0.97x of BF16,
// was 0.67x); at depth 0 GAAC 9,130 against 8,837 (expand_pages_kernel 3.6 µs a layer there).
//
// Memory: n_seqs x n_head_kv x 2 x n_half x ceil(max_len / 16) pages of 16 x tile_dim BF16
// (AttentionArgs::max_len: the launch's longest sequence; Llama-3.1-8B's shape at 32K tokens:
// 134 MB), kept between calls like the scratch buffer. A launch without max_len (a step that may
// be recorded as a graph) is not expanded; one that would need more than
// GAACRT_CUDA_GAAC_EXPAND_MIB (default 1024, read once), or more than the device can allocate,
// runs the GAAC kernels instead, which decode inside the attention and need none.
// GAACRT_CUDA_GAAC_EXPAND=0 (read on every call) turns the expansion off, =1 takes it for every
// prefill-sized launch (default: more than one row group of 64 rows, kExpandMinRows).
//
// Ordering under programmatic dependent launch (cuda_common.h): the attention kernel reads its
// sequences and block table before its PDL wait (and a decode-sized sequence's first pages, in a
// launch that mixes them), so expand_tables_kernel writes the sequences' copies (their tables
// pointed at tables of their pages: per tile column, blocks 0 .. nb-1 in a row),
// expand_pages_kernel the pages, and the attention is launched without PDL (PdlOff): it starts
// once the pages are written.
// (Its launch latency is no longer hidden: a few µs a layer of a prefill.)
#include <algorithm>
#include <cstdlib>

#include "cuda_backend.h"
#include "cuda_common.h"
#include "kernels/attention_block.cuh"

namespace gaacrt::cuda {
namespace {

using attn::GaacStaging;
using attn::kFull;

constexpr int kExpandWarps = 4;
constexpr int kExpandThreads = 32 * kExpandWarps;
constexpr int64_t kExpandMinRows = 65;  // more than one wide row group (attention_wide.cuh kWideRows)

struct ExpandArgs {
  KVLayerView kv;  // the GAAC layer
  GaacStaging gs;
  const AttnSeq* seqs;
  AttnSeq* x_seqs;     // out: the sequences, tables into x_tables
  uint32_t* x_tables;  // out: [n_seqs][n_head_kv][2][n_half][max_blocks], kv_view.h's layout
  uint8_t* x_pages;    // out: [n_seqs][n_head_kv][2][n_half][nb] pages of page_bytes
  int64_t entries;     // table entries of one sequence: n_head_kv * 2 * n_half * max_blocks
  int32_t nb;          // blocks of the longest sequence (ceil(max_len / 16)), at most max_blocks
  int32_t n_seqs, window;
  uint32_t stage_bytes;  // per warp, with 16 bytes of slack (the decoder reads up to 8 past)
  DeviceErrors* err;
};

// The page of (sequence, tile column t = (head, K|V, half), block b < nb).
__device__ __forceinline__ int64_t expanded_page(const ExpandArgs& A, int64_t seq, int64_t t, int32_t b) {
  const int64_t cols = A.entries / A.kv.max_blocks;
  return (seq * cols + t) * A.nb + b;
}

__global__ void expand_tables_kernel(const ExpandArgs A) {
  pdl_begin();
  const int64_t n = (int64_t)A.n_seqs * A.entries;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t seq = i / A.entries, j = i % A.entries, t = j / A.kv.max_blocks;
    const int32_t b = (int32_t)(j % A.kv.max_blocks);
    A.x_tables[i] = b < A.nb ? (uint32_t)expanded_page(A, seq, t, b) : KV_ENTRY_EMPTY;
    if (i < A.n_seqs) {
      AttnSeq s = A.seqs[i];
      s.table = A.x_tables + i * A.entries;
      A.x_seqs[i] = s;
    }
  }
}

// n 16-byte chunks (at most 32 * kN), lanes of a warp: zeros (src null) or a copy, every load
// issued before the first store (one trip to memory; load, store, load, store in a loop were
// kN trips in series: the compiler cannot move a load above a store that may alias it).
template <int kN>
__device__ __forceinline__ void copy_chunks(const uint8_t* src, uint8_t* dst, uint32_t n, int lane) {
  uint4 v[kN];
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    const uint32_t c = lane + 32u * k;
    v[k] = src && c < n ? reinterpret_cast<const uint4*>(src)[c] : make_uint4(0u, 0u, 0u, 0u);
  }
#pragma unroll
  for (int k = 0; k < kN; ++k)
    if (lane + 32u * k < n) reinterpret_cast<uint4*>(dst)[lane + 32u * k] = v[k];
}
// A [16][td] page (2 td chunks, at most 256).
__device__ __forceinline__ void copy_page(const uint8_t* src, uint8_t* dst, int32_t td, int lane) {
  copy_chunks<2 * KV_TILE_MAX_DIM / 32>(src, dst, 2u * (uint32_t)td, lane);
}

// Grid (x: groups of kExpandWarps blocks, y: (kv-head, K|V, half), z: sequence): a warp per block
// (with 8 blocks a warp, and copies whose loads and stores alternated, a 512-token prefill had 16
// thread blocks and 17.9 µs a layer on an H100; now 3.6). The warp loads its column's bases and
// stages the block's slot in shared memory (16-byte copies where the layer's slots allow, else
// bytes); its tags are validated as in the attention kernels (attention_tiles.cuh
// gaac_lane_escapes), then decode_gaac_lane writes straight into the page. A bad tile is reported
// and left as zeros (the GAAC kernels skip its block instead; either way the step raises at the
// next synchronization and its results are not used). Raw pages (the newest, partial block; tiles
// that did not fit their slot) are copied; blocks out of the window or past the sequence are not
// read by the attention and not written.
__global__ void __launch_bounds__(kExpandThreads) expand_pages_kernel(const ExpandArgs A) {
  GAACRT_DYNAMIC_SMEM(smem);
  pdl_begin();
  const KVLayerView& kv = A.kv;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t td = kv.tile_dim, nh = kv.n_half;
  const int32_t t = blockIdx.y, head = t / (2 * nh), is_v = (t / nh) & 1, half = t % nh;
  const AttnSeq s = A.seqs[blockIdx.z];
  const int32_t len = s.pos0 + s.n_q;
  if (s.n_q <= 0 || len <= 0) return;
  // The first key any of the sequence's rows sees (query p sees p - W + 1 .. p).
  const int32_t first = A.window > 0 ? max(0, s.pos0 - A.window + 1) : 0;
  // (b_hi within nb while max_len is the true bound it must be; the clamp keeps the writes in the
  // arena if it is not.)
  const int32_t b_lo = first / KV_BLOCK_TOKENS, b_hi = min(A.nb, (len + KV_BLOCK_TOKENS - 1) / KV_BLOCK_TOKENS);

  const int32_t b = b_lo + blockIdx.x * kExpandWarps + warp;
  if (b >= b_hi) return;  // warp-uniform
  const uint32_t e = s.table[kv_entry_index(kv, head, is_v, half, b)];
  uint8_t* dst = A.x_pages + (uint64_t)expanded_page(A, blockIdx.z, t, b) * kv.page_bytes;
  if (!kv_entry_is_slot(e)) {  // a raw page, or an empty entry (zeros)
    copy_page(e == KV_ENTRY_EMPTY ? nullptr : kv.arena + (uint64_t)e * kv.page_bytes, dst, td, lane);
    return;
  }
  const uint8_t* src = kv_entry_ptr(kv, e, is_v);
  uint8_t* stg = smem + warp * A.stage_bytes;
  if (A.gs.whole(is_v)) {  // at most 4,160 bytes at td 128 (every escape): 9 chunks a lane
    copy_chunks<(GAAC_FIXED_BYTES_128 + GAAC_ESC_BYTES_RAW * 2 * GAAC_MAX_TILE_DIM + 16 * 32 - 1) / (16 * 32)>(
        src, stg, A.gs.staged(is_v) / 16u, lane);
  } else {
    for (uint32_t x = lane; x < attn::gaac_stage_need(td, A.gs.capacity(is_v)); x += 32u) stg[x] = src[x];
  }
  const int32_t nl = gaac_lanes(td), li = lane;  // one tile per warp: lanes 0 .. td/4-1 decode
  GaacU32x2 b3{0u, 0u}, b4{0u, 0u};
  if (li < nl) attn::gaac_column_bases(kv, static_cast<const GaacKVLayer*>(kv.codec), head, is_v, half, li, b3, b4);
  __syncwarp();
  const attn::GaacLaneEscapes x = attn::gaac_lane_escapes<false>(stg, td, li, li < nl, attn::gaac_lanes_of(td, 1, lane).nlp,
                                                                 0, A.gs.capacity(is_v));
  if (__any_sync(kFull, x.bad)) {  // warp-uniform
    if (lane == 0) attn::record_corrupt(A.err, kv.layer, head, b);
    copy_page(nullptr, dst, td, lane);
  } else if (li < nl) {
    attn::decode_gaac_lane(stg, td, li, x.tags, x.xo, x.n_x + 4u * x.rc, b3, b4, reinterpret_cast<uint16_t*>(dst), td);
  }
}

}  // namespace

ExpansionPlan expansion_plan(const KVLayerView& kv, const AttentionArgs& args, int32_t n_seqs) {
  ExpansionPlan x;
  const char* e = std::getenv("GAACRT_CUDA_GAAC_EXPAND");
  if (e && e[0] == '0') return x;
  const int64_t max_rows = (int64_t)std::max(args.max_q, 0) * (args.n_head / kv.n_head_kv);
  const int64_t min_rows = e && e[0] == '1' ? attn::kRowsPerGroup + 1 : kExpandMinRows;
  if (max_rows < min_rows || n_seqs > 65535 || args.max_len <= 0 || kv.max_blocks <= 0) return x;
  const int64_t cols = (int64_t)kv.n_head_kv * 2 * kv.n_half;
  x.entries = cols * kv.max_blocks;
  x.nb = std::min(kv.max_blocks, (args.max_len + KV_BLOCK_TOKENS - 1) / KV_BLOCK_TOKENS);
  x.n_pages = cols * x.nb * n_seqs;
  x.n_entries = x.entries * n_seqs;
  static const uint64_t cap = [] {
    const char* c = std::getenv("GAACRT_CUDA_GAAC_EXPAND_MIB");
    return (uint64_t)(c ? std::max(0, std::atoi(c)) : 1024) << 20;
  }();
  x.table_bytes = ((uint64_t)x.n_entries * 4 + 255) & ~(uint64_t)255;
  const uint64_t seq_bytes = ((uint64_t)n_seqs * sizeof(AttnSeq) + 255) & ~(uint64_t)255;
  const uint64_t bytes = (uint64_t)x.n_pages * kv.page_bytes + x.table_bytes + seq_bytes;
  if (x.n_pages < (int64_t)KV_ENTRY_SLOT && bytes <= cap) x.bytes = bytes;
  return x;
}

bool CudaBackend::attention_expanded(const KVLayerView& kv, const AttentionArgs& args, const AttnSeq* seqs,
                                     int32_t n_seqs, const float* q, float* out) {
  if (kv.format != KVFormat::GAAC || kv.codec == nullptr) return false;
  const ExpansionPlan x = expansion_plan(kv, args, n_seqs);
  if (x.bytes == 0) return false;
  const int64_t n_pages = x.n_pages;
  const uint64_t page_bytes = kv.page_bytes;

  // The slot constants as the GAAC launch takes them (attention.cu); a layer not calibrated yet
  // has no slots (every tile a raw page).
  GaacStaging gs{0u, 0u};
  uint32_t stage = 0;
  for (int is_v = 0; is_v < 2; ++is_v) {
    if (kv.slot_bytes[is_v] == 0) continue;
    (is_v ? gs.v : gs.k) = attn::gaac_stage_word(kv.tile_dim, kv.slot_bytes[is_v], kv.arena, kv.chunk_bytes);
    stage = std::max(stage, gs.staged(is_v));
  }
  uint8_t* base = static_cast<uint8_t*>(expand_buffer(x.bytes));
  if (base == nullptr) return false;  // no memory for it on this device: the GAAC kernels
  ExpandArgs A{kv, gs, seqs, reinterpret_cast<AttnSeq*>(base + (uint64_t)n_pages * page_bytes + x.table_bytes),
               reinterpret_cast<uint32_t*>(base + (uint64_t)n_pages * page_bytes), base, x.entries, x.nb, n_seqs,
               args.sliding_window, stage + 16u, dev_errors_};
  const int tables_grid = (int)std::min<int64_t>((x.n_entries + 255) / 256, 4 * info_.multiprocessors);
  launch_kernel(expand_tables_kernel, dim3((unsigned)std::max(tables_grid, 1)), 256, 0, stream_, A);
  const size_t smem = (size_t)kExpandWarps * A.stage_bytes;  // at most 4 x 4,176 bytes (td 128, every escape)
  const int32_t gx = std::max(1, (x.nb + kExpandWarps - 1) / kExpandWarps);
  launch_kernel(expand_pages_kernel, dim3((unsigned)gx, (unsigned)(kv.n_head_kv * 2 * kv.n_half), (unsigned)n_seqs),
                kExpandThreads, smem, stream_, A);
  GAACRT_CUDA_CHECK(cudaGetLastError());

  // The BF16 view of the pages: the BF16 cache's own launch.
  KVLayerView bf = kv;
  bf.format = KVFormat::BF16;
  bf.arena = base;
  bf.chunk_bytes = KV_CHUNK_PAGES * page_bytes;
  bf.slot_bytes[0] = bf.slot_bytes[1] = 0;
  bf.codec = nullptr;
  PdlOff after_the_pages;
  attention(bf, args, A.x_seqs, n_seqs, q, out);
  return true;
}

}  // namespace gaacrt::cuda
