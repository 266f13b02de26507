// args.h — the argument structs and launch constants shared by the Metal kernels and the host
// planner (backends/metal/host), so that a field or a tile size can never disagree between them.
// Each struct is the `constant XArgs& a [[buffer(0)]]` of its kernels. Plain 32/64-bit fields
// only, laid out the same by Apple's compiler, the emulation and the host C++ compiler (the
// static_asserts pin the sizes).
#pragma once
#include "common/portable.h"

namespace gaacrt {
namespace mtl {

constexpr uint32_t SIMD_WIDTH = 32;

// ---- elementwise.metal ---------------------------------------------------------------------------
constexpr uint32_t ELEMWISE_THREADS = 256;
struct ElementwiseArgs {
  uint32_t n;     // elements
  float cap;      // softcap
};

// ---- rms_norm.metal: one threadgroup per row ------------------------------------------------------
constexpr uint32_t NORM_THREADS = 256;
struct RmsNormArgs {
  uint32_t dim;
  float eps;
};

// ---- rope.metal: one thread per (token, head, rotated pair) ----------------------------------------
constexpr uint32_t ROPE_THREADS = 64;
struct RopeArgs {
  uint32_t n_tok, n_heads, head_dim, n_rot;
  uint32_t neox;        // 1: pairs (i, i + n_rot/2); 0: (2i, 2i + 1)
  float mscale;         // attn_factor, times YaRN's magnitude correction when ext_factor != 0
};

// ---- dequantize.metal / get_rows.metal / matvec.metal / matmul.metal -------------------------------
// Weights are read 32 elements at a time (a "sub-block": a whole Q4_0..Q8_0 block, an eighth of a
// K-quant super-block, 32 elements of a float row).
constexpr uint32_t SUB = 32;
constexpr uint32_t ROWS_THREADS = 64;      // dequantize / get_rows: one thread per sub-block
struct RowsArgs {
  uint32_t n_rows;      // rows to produce
  uint32_t n_cols;      // elements per row
  uint32_t n_sub;       // sub-blocks per row: ceil(n_cols / 32)
  uint32_t row_stride;  // bytes between source rows
  float scale;          // get_rows: times the embedding scale (1 = none)
};

constexpr uint32_t MATVEC_SIMDGROUPS = 4;  // one weight row per SIMD group at a time
constexpr uint32_t MATVEC_MAX_TOK = 8;     // tokens sharing one pass over the weights
struct MatmulArgs {
  uint32_t n_rows, n_cols, n_sub, row_stride;
  uint32_t n_tok;
  uint32_t has_bias;
};
// matmul.metal: a threadgroup computes a TILE_ROWS x TILE_TOK tile of y over K steps of 32.
constexpr uint32_t MM_TILE_ROWS = 32, MM_TILE_TOK = 32, MM_THREADS = 128;
constexpr uint32_t MM_PAD = SUB + 1;       // row pitch of the threadgroup tiles (no bank conflicts)

// ---- kv_store.metal: one threadgroup per (kv-head, token) ---------------------------------------
// Block tables are staged per dispatch: `tables` holds each distinct sequence table once, and
// token t's table starts at tables[tok[t].table].
struct KVTokenRef {
  uint32_t table;       // offset (in entries) of the token's block table in the staged tables
  int32_t pos;
};
struct KVStoreArgs {
  uint32_t n_tok, n_head_kv, dk, dv, tile_dim, n_half, max_blocks;
  uint32_t pad;
  uint64_t page_bytes;
};

// ---- kv_finalize.metal: one thread per job (E8 keys: per (job group, token)) ------------------------
constexpr uint32_t FINALIZE_THREADS = 32;
struct KVFinalizeArgs {
  uint32_t n_jobs, tile_dim, dk, dv, n_half, max_blocks;
  uint32_t capacity[2];   // GAAC escape capacity of K / V slots
  uint32_t format;        // KVFormat
  uint32_t n_groups;      // E8 keys: (head, block) groups of n_half jobs
  float alpha;            // E8
  uint32_t pad;
  uint64_t page_bytes, chunk_bytes;
  uint64_t slot_bytes[2];
};
// E8 keys are encoded a whole head at a time (the rotation mixes the halves): the jobs of one
// (head, block), by half.
struct E8KeyGroup {
  uint32_t job[2];
};
// rotate_rows (E8 queries into the keys' rotated basis): one thread per (row, output channel).
constexpr uint32_t ROTATE_THREADS = 64;
struct RotateArgs {
  uint32_t n_rows, d;
};

// ---- attention.metal -------------------------------------------------------------------------------
// Work item = (sequence, kv-head, chunk of ATTN_CHUNK_BLOCKS blocks aligned to absolute block
// indices, tile of query tokens): one threadgroup. The chunking is the CPU's and never depends on
// the cache format, so a lossless format gives the same bits. attention_merge then combines the
// chunks of each (query token, head) in chunk order.
constexpr uint32_t ATTN_CHUNK_BLOCKS = 32;
constexpr uint32_t ATTN_SIMDGROUPS = 4;
constexpr uint32_t ATTN_THREADS = ATTN_SIMDGROUPS * SIMD_WIDTH;
constexpr uint32_t ATTN_ROWS_PER_SG = 4;   // (query token, head) rows per SIMD group
constexpr uint32_t ATTN_MAX_ROWS = ATTN_SIMDGROUPS * ATTN_ROWS_PER_SG;
constexpr uint32_t ATTN_MAX_DIM = 256;     // head_dim_k, head_dim_v
constexpr uint32_t MERGE_THREADS = 64;
struct AttnItem {
  uint32_t seq;          // index into the staged AttnSeqRef array
  uint32_t kvh;
  int32_t b0, b1;        // blocks [b0, b1)
  int32_t q0, nq;        // query tokens [q0, q0 + nq) of the sequence
  uint32_t partial;      // first partial row of this item: rows (i, g) at partial + i*G + g
  uint32_t pad;
};
struct AttnSeqRef {
  uint32_t table;        // offset of the sequence's block table in the staged tables
  int32_t q_begin, n_q, pos0;
};
// One (query token, head) output: its chunks' partial rows, in chunk order.
struct AttnMergeRow {
  uint32_t out_row;      // query row in the batch * n_head + head
  uint32_t first;        // partial row of chunk 0
  uint32_t n_chunks;
  uint32_t stride;       // partial rows between consecutive chunks
};
struct AttnArgs {
  uint32_t n_items, n_head, n_head_kv, group;  // group = n_head / n_head_kv
  uint32_t dk, dv, tile_dim, n_half, max_blocks;
  int32_t sliding_window;
  float scale, softcap;
  uint32_t gaac_capacity[2];
  uint32_t n_merge;
  float e8_alpha;
  uint64_t page_bytes, chunk_bytes;
  uint64_t slot_bytes[2];
};
// Partial row layout (floats): m, l, then dv accumulators.
constexpr uint32_t ATTN_PARTIAL_HEADER = 2;
// Status per work item (int32): -1 = fine, else the first block whose compressed tile failed
// validation (reserved tag, escapes past the slot's capacity).

GAACRT_STATIC_ASSERT(sizeof(RowsArgs) == 20, "RowsArgs layout");
GAACRT_STATIC_ASSERT(sizeof(KVStoreArgs) == 40, "KVStoreArgs layout");
GAACRT_STATIC_ASSERT(sizeof(KVFinalizeArgs) == 80, "KVFinalizeArgs layout");
GAACRT_STATIC_ASSERT(sizeof(AttnItem) == 32, "AttnItem layout");
GAACRT_STATIC_ASSERT(sizeof(AttnArgs) == 96, "AttnArgs layout");

}  // namespace mtl
}  // namespace gaacrt
