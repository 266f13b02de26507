// matvec.cpp — cpu::matmul(s): quantize activations once, then split output rows over threads.
//
// Decode (n_tok == 1) streams each weight row from memory exactly once, so its speed is memory
// bandwidth and the per-block work of vec_dot. Prefill (n_tok > 1) would stream the whole matrix
// once per token if it looped tokens outside rows; instead each thread walks its rows in small
// chunks that fit in L1/L2 and runs every token over a chunk before moving on (row chunk outer,
// tokens inner), so the weights cross the memory bus once per matmul and the quantized
// activations (n_tok rows of ~1.07 bytes per element at 8 bits, 2.25 at 16) stay in L2/L3.
// Within a chunk, where the ISA has a tile kernel (AVX2: 2 rows × 4 tokens, K-quants 1 × 4), each
// weight block is decoded once per 4 tokens and each activation block loaded once per tile row.
// Tile outputs are bit-identical to vec_dot's, so a token's result never depends on the batch
// it came in.
#include "matvec.h"

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "quantize_act.h"
#include "vec_dot.h"

namespace gaacrt::cpu {

namespace {

// Below this many tokens the activations are quantized on the calling thread: waking the pool
// costs more than quantizing a few rows.
constexpr int64_t kParallelQuantizeMinTokens = 8;

// Target bytes of weights per prefill chunk: about half a typical 32-48 KiB L1d.
constexpr size_t kChunkBytes = 16 * 1024;

void check_weight(const WeightView& w) {
  require_gguf_layout(w, "cpu matmul");
  const TypeTraits* tr = type_traits(w.type);
  if (!tr || !tr->supported)
    throw Error("quant", "unsupported_type", strfmt("matmul: weight type %s is not supported", type_name(w.type)));
  if (w.n_cols <= 0 || w.n_cols % tr->block_size != 0)
    throw Error("quant", "bad_shape", strfmt("matmul: row length %lld is not a positive multiple of the %s block size %u",
                                             (long long)w.n_cols, tr->name, tr->block_size));
  if (w.row_stride < row_bytes(w.type, w.n_cols))
    throw Error("quant", "bad_shape", strfmt("matmul: row stride %zu is shorter than a %s row of %lld elements (%zu bytes)",
                                             w.row_stride, tr->name, (long long)w.n_cols, row_bytes(w.type, w.n_cols)));
}

// Which activation buffer a weight type reads: its act_type at 8 bits, one Q16 buffer for every
// quantized type at 16 (key kQ16Key), the input floats themselves for float weights (kF32Key).
constexpr int kQ16Key = -16, kF32Key = static_cast<int>(GGMLType::F32);
int act_key(GGMLType w, int act_bits) {
  const GGMLType at = act_type(w);
  return at != GGMLType::F32 && act_bits == 16 ? kQ16Key : static_cast<int>(at);
}

// One weight matrix's share of the rows [r0, r1) for all tokens.
void rows_product(const WeightView& w, VecDotFn dot, const GemmTile& tile, const uint8_t* act, size_t a_stride,
                  int64_t n_tok, float* y, int64_t r0, int64_t r1) {
  const uint8_t* wbase = static_cast<const uint8_t*>(w.data);
  const int64_t n = w.n_cols;
  if (n_tok == 1) {  // decode: one pass over the rows, one weight stream for the prefetcher
    for (int64_t r = r0; r < r1; ++r) y[r] = dot(n, wbase + r * w.row_stride, act);
    return;
  }
  const int64_t chunk = matmul_row_chunk(w.row_stride);
  for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
    const int64_t c1 = std::min(r1, c0 + chunk);
    int64_t t = 0;
    if (tile.fn) {  // full tiles of tile.rows × tile.tokens, then the chunk's leftover rows 1×1
      for (; t + tile.tokens <= n_tok; t += tile.tokens) {
        int64_t r = c0;
        for (; r + tile.rows <= c1; r += tile.rows)
          tile.fn(n, wbase + r * w.row_stride, w.row_stride, act + t * a_stride, a_stride, y + t * w.n_rows + r, w.n_rows);
        for (; r < c1; ++r)
          for (int64_t k = t; k < t + tile.tokens; ++k) y[k * w.n_rows + r] = dot(n, wbase + r * w.row_stride, act + k * a_stride);
      }
    }
    for (; t < n_tok; ++t) {  // tokens past the last full tile (all tokens without a tile kernel)
      const uint8_t* a = act + t * a_stride;
      float* yt = y + t * w.n_rows;
      for (int64_t r = c0; r < c1; ++r) yt[r] = dot(n, wbase + r * w.row_stride, a);
    }
  }
}

}  // namespace

int64_t matmul_row_chunk(size_t row_bytes) {
  const int64_t rows = static_cast<int64_t>(kChunkBytes / std::max<size_t>(row_bytes, 1));
  return std::clamp<int64_t>(rows / 4 * 4, 4, 64);
}

void matmuls(int n_w, const WeightView* w, const float* x, int64_t n_tok, float* const* y, ThreadPool& pool, Isa isa,
             int act_bits) {
  check_act_bits(act_bits);
  if (n_w < 1 || n_w > kMaxMatmulGroup)
    throw Error("quant", "bad_shape", strfmt("matmuls: %d matrices (1..%d share one input)", n_w, kMaxMatmulGroup));
  for (int i = 0; i < n_w; ++i) {
    check_weight(w[i]);
    if (w[i].n_cols != w[0].n_cols)
      throw Error("quant", "bad_shape", strfmt("matmuls: matrix %d has %lld columns, matrix 0 has %lld", i,
                                               (long long)w[i].n_cols, (long long)w[0].n_cols));
  }
  if (n_tok <= 0) return;
  const int64_t n = w[0].n_cols;

  // 1. Activations, once per token and distinct format.
  struct Act {
    int key;
    const uint8_t* data;
    size_t stride;  // bytes per token
  };
  Act acts[kMaxMatmulGroup];
  int n_act = 0, which[kMaxMatmulGroup];
  thread_local std::vector<uint8_t> scratch[kMaxMatmulGroup];  // reused across calls: decode makes hundreds per token
  for (int i = 0; i < n_w; ++i) {
    const int key = act_key(w[i].type, act_bits);
    int k = 0;
    while (k < n_act && acts[k].key != key) ++k;
    which[i] = k;
    if (k < n_act) continue;
    ++n_act;
    const size_t a_stride = act_row_bytes(w[i].type, n, act_bits);
    acts[k] = {key, reinterpret_cast<const uint8_t*>(x), a_stride};
    if (key == kF32Key) continue;  // float weights read x as it is
    scratch[k].resize(a_stride * static_cast<size_t>(n_tok));
    uint8_t* q = scratch[k].data();
    const QuantizeRowFn quant = quantize_act_fn(w[i].type, isa, act_bits);
    auto quantize = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) quant(x + t * n, q + t * a_stride, n);
    };
    if (n_tok < kParallelQuantizeMinTokens) quantize(0, n_tok);
    else pool.parallel_for(n_tok, quantize);
    acts[k].data = q;
  }

  VecDotFn dots[kMaxMatmulGroup];
  GemmTile tiles[kMaxMatmulGroup];
  for (int i = 0; i < n_w; ++i) {
    dots[i] = vec_dot_fn(w[i].type, isa, act_bits);
    tiles[i] = n_tok > 1 ? gemm_tile_fn(w[i].type, isa, act_bits) : GemmTile{};
  }

  // 2. Output rows of every matrix, one contiguous range per thread and matrix (a multiple of 4
  //    rows, so a thread's range starts on its own cache line of y for every type).
  pool.run([&](int ith, int nth) {
    for (int i = 0; i < n_w; ++i) {
      if (w[i].n_rows <= 0) continue;
      const int64_t per = ((w[i].n_rows + nth - 1) / nth + 3) / 4 * 4;
      const int64_t r0 = std::min(w[i].n_rows, per * ith), r1 = std::min(w[i].n_rows, r0 + per);
      const Act& a = acts[which[i]];
      rows_product(w[i], dots[i], tiles[i], a.data, a.stride, n_tok, y[i], r0, r1);
    }
  });
}

void matmul(const WeightView& w, const float* x, int64_t n_tok, float* y, ThreadPool& pool, Isa isa, int act_bits) {
  matmuls(1, &w, x, n_tok, &y, pool, isa, act_bits);
}

}  // namespace gaacrt::cpu
