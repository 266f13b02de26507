// attention_plan.cpp — the attention op's work partition and dispatches (metal_plan.h).
//
// The partition is backends/cpu/attention.cpp's: per (sequence, kv-head) the visible blocks are
// cut into chunks of ATTN_CHUNK_BLOCKS aligned to absolute multiples (so a query's partial sums do
// not depend on what else is in the batch), and chunks are merged in chunk order. On top of that
// the sequence's query tokens are tiled so one threadgroup holds at most ATTN_MAX_ROWS (query
// token, head) rows; rows never interact, so the tiling changes no arithmetic. Nothing here looks
// at the cache format: BF16 and GAAC caches get the same items, the same order, the same bits.
#include <algorithm>

#include "codec/gaac/gaac_format.h"
#include "common/error.h"
#include "kv/gaac_codec.h"
#include "kv/lossy_codecs.h"
#include "metal_plan.h"

namespace gaacrt::mtl {

size_t AttentionPlan::partial_bytes(int32_t dv) const {
  return (size_t)partial_rows * (ATTN_PARTIAL_HEADER + (size_t)dv) * sizeof(float);
}

namespace {

void check_shapes(const KVLayerView& kv, const gaacrt::AttentionArgs& a) {
  const int32_t G = kv.n_head_kv > 0 ? a.n_head / kv.n_head_kv : 0;
  if (kv.n_head_kv <= 0 || a.n_head % kv.n_head_kv || G > (int32_t)ATTN_MAX_ROWS)
    throw Error("backend", "unsupported", strfmt("metal attention: %d query heads over %d kv-heads (group of at most %u)",
                                                 a.n_head, kv.n_head_kv, ATTN_MAX_ROWS));
  if (kv.head_dim_k > (int32_t)ATTN_MAX_DIM || kv.head_dim_v > (int32_t)ATTN_MAX_DIM || kv.head_dim_k % 2 ||
      kv.n_half > 2 || kv.tile_dim * kv.n_half != kv.head_dim_k ||
      kv.head_dim_k != kv.head_dim_v)
    throw Error("backend", "unsupported", strfmt("metal attention: head dims %d/%d, tile_dim %d x %d halves",
                                                 kv.head_dim_k, kv.head_dim_v, kv.tile_dim, kv.n_half));
}

}  // namespace

AttentionPlan partition_attention(const KVLayerView& kv, const gaacrt::AttentionArgs& a, const AttnSeq* seqs,
                                  int32_t n_seqs) {
  check_shapes(kv, a);
  const int32_t G = a.n_head / kv.n_head_kv;
  const int32_t qt = std::max<int32_t>(1, (int32_t)ATTN_MAX_ROWS / G);  // query tokens per tile
  const int32_t C = (int32_t)ATTN_CHUNK_BLOCKS;
  AttentionPlan p;
  for (int32_t si = 0; si < n_seqs; ++si) {
    const AttnSeq& s = seqs[si];
    if (s.n_q <= 0) continue;
    const int32_t last = s.pos0 + s.n_q - 1;
    const int32_t lo = a.sliding_window > 0 ? std::max(0, s.pos0 - a.sliding_window + 1) : 0;
    const int32_t bl = lo / KV_BLOCK_TOKENS, bh = last / KV_BLOCK_TOKENS + 1;
    for (int32_t h = 0; h < kv.n_head_kv; ++h)
      for (int32_t q0 = 0; q0 < s.n_q; q0 += qt) {
        const int32_t nq = std::min(qt, s.n_q - q0), rows = nq * G;
        const uint32_t first = p.partial_rows;
        uint32_t n_chunks = 0;
        for (int32_t b = bl / C * C; b < bh; b += C, ++n_chunks) {
          AttnItem it{};
          it.seq = (uint32_t)si;
          it.kvh = (uint32_t)h;
          it.b0 = std::max(b, bl);
          it.b1 = std::min(bh, b + C);
          it.q0 = q0;
          it.nq = nq;
          it.partial = p.partial_rows;
          p.items.push_back(it);
          p.partial_rows += (uint32_t)rows;
        }
        for (int32_t i = 0; i < nq; ++i)
          for (int32_t g = 0; g < G; ++g)
            p.merge.push_back({(uint32_t)((s.q_begin + q0 + i) * a.n_head + h * G + g), first + (uint32_t)(i * G + g),
                               n_chunks, (uint32_t)rows});
      }
  }
  return p;
}

namespace {

int64_t query_rows(const AttnSeq* seqs, int32_t n_seqs) {
  int64_t n_tok = 0;
  for (int32_t si = 0; si < n_seqs; ++si) n_tok = std::max<int64_t>(n_tok, seqs[si].q_begin + seqs[si].n_q);
  return n_tok;
}

}  // namespace

size_t attention_rotation_bytes(const KVLayerView& kv, const gaacrt::AttentionArgs& a, const AttnSeq* seqs,
                                int32_t n_seqs) {
  if (kv.format != KVFormat::E8) return 0;
  return (size_t)query_rows(seqs, n_seqs) * a.n_head * kv.head_dim_k * sizeof(float);
}

std::vector<Dispatch> plan_attention(const KVLayerView& kv, const gaacrt::AttentionArgs& a, const AttnSeq* seqs,
                                     int32_t n_seqs, const float* q, float* out, const AttentionPlan& part,
                                     float* partials, int32_t* status, float* q_rot) {
  // The format picks the tile loader (and the tile element: BF16 bits, or fp32 for the lossy ones).
  const char* kernel = nullptr;
  uint32_t elem = 2;
  AttnArgs x{};
  switch (kv.format) {
    case KVFormat::BF16: kernel = "attention_bf16"; break;
    case KVFormat::GAAC: {
      kernel = "attention_gaac";
      const GaacKVLayer& st = *static_cast<const GaacKVLayer*>(kv.codec);
      x.gaac_capacity[0] = st.capacity[0];
      x.gaac_capacity[1] = st.capacity[1];
      break;
    }
    case KVFormat::Q8: kernel = "attention_q8"; elem = 4; break;
    case KVFormat::KIVI2: kernel = "attention_kivi2"; elem = 4; break;
    case KVFormat::E8:
      kernel = "attention_e8";
      elem = 4;
      x.e8_alpha = static_cast<const E8KVLayer*>(kv.codec)->alpha;
      if (static_cast<const E8KVLayer*>(kv.codec)->mean || static_cast<const E8KVLayer*>(kv.codec)->block_mean)
        throw Error("backend", "unsupported_format",
                    "metal attention: E8 key centering (e8_center=global or block) is not implemented on Metal");
      if (!q_rot) throw Error("backend", "invalid_argument", "metal attention: the E8 cache needs rotated-query scratch");
      break;
    default:
      throw Error("kv", "unsupported_format", strfmt("metal attention: cache format %d has no Metal tile loader yet",
                                                     (int)kv.format));
  }
  x.n_items = (uint32_t)part.items.size();
  x.n_head = (uint32_t)a.n_head;
  x.n_head_kv = (uint32_t)kv.n_head_kv;
  x.group = (uint32_t)(a.n_head / kv.n_head_kv);
  x.dk = (uint32_t)kv.head_dim_k;
  x.dv = (uint32_t)kv.head_dim_v;
  x.tile_dim = (uint32_t)kv.tile_dim;
  x.n_half = (uint32_t)kv.n_half;
  x.max_blocks = (uint32_t)kv.max_blocks;
  x.sliding_window = a.sliding_window;
  x.scale = a.scale;
  x.softcap = a.softcap;
  x.n_merge = (uint32_t)part.merge.size();
  x.page_bytes = kv.page_bytes;
  x.chunk_bytes = kv.chunk_bytes;
  x.slot_bytes[0] = kv.slot_bytes[0];
  x.slot_bytes[1] = kv.slot_bytes[1];

  const int64_t per_table = (int64_t)kv.n_head_kv * 2 * kv.n_half * kv.max_blocks;
  StagedTables tables;
  std::vector<AttnSeqRef> refs((size_t)n_seqs);
  for (int32_t si = 0; si < n_seqs; ++si)
    refs[si] = {tables.add(seqs[si].table, per_table), seqs[si].q_begin, seqs[si].n_q, seqs[si].pos0};
  const int64_t n_tok = query_rows(seqs, n_seqs);
  const size_t q_bytes = (size_t)n_tok * a.n_head * kv.head_dim_k * 4;
  // Bases of the GAAC layer, or any bound buffer for a format that reads none.
  const void* bases[4] = {kv.arena, kv.arena, kv.arena, kv.arena};
  size_t base_bytes[4] = {0, 0, 0, 0};
  if (kv.format == KVFormat::GAAC) {
    const GaacKVLayer& st = *static_cast<const GaacKVLayer*>(kv.codec);
    for (int i = 0; i < 4; ++i)
      if (st.bases[i / 2][i % 2]) {  // null until the cache is calibrated (every tile is raw until then)
        bases[i] = st.bases[i / 2][i % 2];
        base_bytes[i] = (size_t)kv.n_head_kv * (i < 2 ? kv.head_dim_k : kv.head_dim_v);
      }
  }
  std::vector<Dispatch> out_d;
  if (part.items.empty()) return out_d;
  if (kv.format == KVFormat::E8) {  // every query row into the keys' rotated basis, once per step
    const RotateArgs r{checked_u32("attention", "rows", n_tok * a.n_head), (uint32_t)kv.head_dim_k};
    Dispatch rd;
    rd.kernel = "rotate_rows";
    rd.grid[0] = div_up((int64_t)r.n_rows * r.d, ROTATE_THREADS);
    rd.threads = ROTATE_THREADS;
    rd.buffers = {BufferArg::stage_one(r), BufferArg::device(q, q_bytes),
                  BufferArg::device(static_cast<const E8KVLayer*>(kv.codec)->rot, (size_t)r.d * r.d * 4),
                  BufferArg::device(q_rot, q_bytes)};
    out_d.push_back(std::move(rd));
  }
  Dispatch d;
  d.kernel = kernel;
  d.grid[0] = x.n_items;
  d.threads = ATTN_THREADS;
  d.tg_bytes = {(uint32_t)(KV_BLOCK_TOKENS * kv.head_dim_k) * elem, (uint32_t)(KV_BLOCK_TOKENS * kv.head_dim_v) * elem};
  const size_t partial_floats = (size_t)part.partial_rows * (ATTN_PARTIAL_HEADER + kv.head_dim_v);
  d.buffers = {BufferArg::stage_one(x),
               BufferArg::stage(part.items.data(), part.items.size()),
               BufferArg::stage(refs.data(), refs.size()),
               BufferArg::stage(tables.entries.data(), tables.entries.size()),
               BufferArg::device(q, q_bytes), BufferArg::device(q_rot ? q_rot : q, q_bytes),
               BufferArg::device(kv.arena, 0)};
  for (int i = 0; i < 4; ++i) d.buffers.push_back(BufferArg::device(bases[i], base_bytes[i]));
  d.buffers.push_back(BufferArg::device(partials, partial_floats * 4));
  d.buffers.push_back(BufferArg::device(status, part.status_bytes()));
  out_d.push_back(std::move(d));

  Dispatch m;
  m.kernel = "attention_merge";
  m.grid[0] = x.n_merge;
  m.threads = MERGE_THREADS;
  m.buffers = {BufferArg::stage_one(x), BufferArg::stage(part.merge.data(), part.merge.size()),
               BufferArg::device(partials, partial_floats * 4),
               BufferArg::device(out, (size_t)n_tok * a.n_head * kv.head_dim_v * 4)};
  out_d.push_back(std::move(m));
  return out_d;
}

}  // namespace gaacrt::mtl
