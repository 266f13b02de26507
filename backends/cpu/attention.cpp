// attention.cpp — attention over the paged cache on the CPU (the reference for every backend).
//
// Per (sequence, kv-head) the tiles of K and V are loaded once per 16-token block and used by
// all the query heads of the group (GQA) and all the sequence's query tokens. One pass with an
// online softmax (running max m, sum l, weighted sum acc) over the visible blocks; long contexts
// are split into fixed chunks of blocks processed in parallel and merged in chunk order. The
// chunking depends only on lengths and thread count, never on the cache format, so a lossless
// format gives bit-identical results (DESIGN.md "What must stay true").
#include <algorithm>
#include <cmath>
#include <vector>

#include "codec/gaac/gaac_format.h"
#include "codec/gaac/gaac_fp8_format.h"
#include "codec/gaac/gaac_host.h"
#include "common/error.h"
#include "common/half.h"
#include "codec/e8/e8_keys.h"
#include "codec/e8/e8_rotation.h"
#include "kv/gaac_codec.h"
#include "kv/lossy_codecs.h"
#include "attention_math.h"
#include "ops.h"

namespace gaacrt::cpu {
namespace {

constexpr float kNegInf = -INFINITY;

// Rows [16][head_dim] of one block's K or V for one kv-head, as fp32, from wherever the block
// table says the tile lives: a raw BF16 page, or a compressed slot decoded on the fly (nothing is
// ever decompressed to a full copy; a tile at a time goes through this scratch). Returns false on
// a corrupt slot.
bool load_block(const KVLayerView& kv, const uint32_t* table, int32_t head, int32_t is_v, int32_t block, float* out,
                uint16_t* tile, bool* rotated) {
  const int32_t d = is_v ? kv.head_dim_v : kv.head_dim_k, td = kv.tile_dim;
  *rotated = false;
  for (int32_t half = 0; half < kv.n_half; ++half) {
    const uint32_t e = table[kv_entry_index(kv, head, is_v, half, block)];
    const uint16_t* src;
    if (!kv_entry_is_slot(e)) {
      src = reinterpret_cast<const uint16_t*>(kv.arena + (uint64_t)e * kv.page_bytes);
    } else if (kv_format_is_lossy(kv.format)) {
      // E8 / q8 / kivi2: decoded straight to fp32 (E8 keys in the rotated basis: *rotated).
      decode_lossy_tile(kv, kv_entry_ptr(kv, e, is_v), is_v, head, half, out + half * td, d);
      if (kv.format == KVFormat::E8 && !is_v) *rotated = true;
      continue;
    } else {
      const GaacKVLayer& st = *static_cast<const GaacKVLayer*>(kv.codec);
      const int64_t off = (int64_t)head * d + (int64_t)half * td;
      if (st.element != 0) {
        // FP8 + GAAC: the exact FP8 bits back, times the head's power-of-two scale (exact).
        uint8_t* fp8 = reinterpret_cast<uint8_t*>(tile);
        const int32_t kind = gaac_kv_fp8_kind(st);
        const GaacCheck c = gaac_fp8_decode_rows(kind, kv_entry_ptr(kv, e, is_v), td, st.capacity[is_v],
                                                 st.bases[is_v][0] + off, st.bases[is_v][1] + off, 0xFFFFu, fp8, td);
        if (c.status != GAAC_OK) return false;
        const float s = st.scales[is_v][head];
        for (int32_t r = 0; r < KV_BLOCK_TOKENS; ++r)
          for (int32_t c2 = 0; c2 < td; ++c2) out[r * d + half * td + c2] = gaac_fp8_to_f32(kind, fp8[r * td + c2]) * s;
        continue;
      }
      // GAAC: lossless, so attention sees exactly the BF16 values a raw page would hold.
      const GaacCheck c = gaac_decode_tile_fast(kv_entry_ptr(kv, e, is_v), td, st.capacity[is_v],
                                                st.bases[is_v][0] + off, st.bases[is_v][1] + off, tile, td);
      if (c.status != GAAC_OK) return false;
      src = tile;
    }
    const AttentionMath& m = attention_math();
    if (kv.n_half == 1) m.bf16_to_f32(src, out, KV_BLOCK_TOKENS * td);  // rows are contiguous: one run
    else
      for (int32_t r = 0; r < KV_BLOCK_TOKENS; ++r) m.bf16_to_f32(src + r * td, out + r * d + half * td, td);
  }
  return true;
}

struct Partial {  // online-softmax state of one (query token, head) over a chunk of blocks
  float m, l;
};

// Processes blocks [b0, b1) of one (seq, kv-head) for all its query tokens and group heads.
// state: (n_q, G) Partials; acc: (n_q, G, dv).
// Returns the first block that failed to load (a corrupt slot), or -1.
// tables (E8 table scoring, decode steps only): per query row and head, d/8 tables of 65,536
// scores (e8_build_query_tables), laid out [row][head][d/8][65536]; null for the default path.
int32_t attend_chunk(const KVLayerView& kv, const AttentionArgs& a, const AttnSeq& s, int32_t kvh, int32_t b0,
                     int32_t b1, const float* q, const float* q_rot, const float* tables, Partial* state, float* acc,
                     std::vector<float>& kbuf, std::vector<float>& vbuf) {
  const int32_t G = a.n_head / kv.n_head_kv, dk = kv.head_dim_k, dv = kv.head_dim_v;
  kbuf.resize((size_t)KV_BLOCK_TOKENS * dk);
  vbuf.resize((size_t)KV_BLOCK_TOKENS * dv);
  for (int32_t i = 0; i < s.n_q * G; ++i) state[i] = {kNegInf, 0.f};
  std::fill(acc, acc + (size_t)s.n_q * G * dv, 0.f);
  float sc[KV_BLOCK_TOKENS], wt[KV_BLOCK_TOKENS];  // a block's scores and softmax weights
  uint16_t tile[KV_BLOCK_TOKENS * KV_TILE_MAX_DIM];
  const AttentionMath& math = attention_math();  // the inner loops, vectorized where the CPU can
  for (int32_t b = b0; b < b1; ++b) {
    bool k_rotated = false, v_rotated = false;
    // E8 table path: a compressed key block is scored by gathers from the query's tables (A)
    // instead of being decoded (B); the block is not loaded as floats at all.
    const uint8_t* k_slots[2] = {nullptr, nullptr};
    bool by_table = false;
    if (tables) {
      by_table = true;
      for (int32_t half = 0; half < kv.n_half; ++half) {
        const uint32_t e = s.table[kv_entry_index(kv, kvh, 0, half, b)];
        by_table = by_table && kv_entry_is_slot(e);
        k_slots[half] = by_table ? kv_entry_ptr(kv, e, 0) : nullptr;
      }
    }
    if ((!by_table && !load_block(kv, s.table, kvh, 0, b, kbuf.data(), tile, &k_rotated)) ||
        !load_block(kv, s.table, kvh, 1, b, vbuf.data(), tile, &v_rotated))
      return b;
    // E8 keys live in the layer's rotated basis: score them against the rotated queries.
    const float* qb = k_rotated ? q_rot : q;
    for (int32_t i = 0; i < s.n_q; ++i) {
      const int32_t p = s.pos0 + i;
      const int32_t lo = a.sliding_window > 0 ? std::max(0, p - a.sliding_window + 1) : 0;
      const int32_t j0 = std::max(b * KV_BLOCK_TOKENS, lo), j1 = std::min(b * KV_BLOCK_TOKENS + KV_BLOCK_TOKENS, p + 1);
      if (j0 >= j1) continue;
      for (int32_t g = 0; g < G; ++g) {
        const float* qv = qb + ((int64_t)(s.q_begin + i) * a.n_head + kvh * G + g) * dk;
        Partial& st = state[i * G + g];
        float* ac = acc + ((int64_t)i * G + g) * dv;
        const int32_t nj = j1 - j0;
        float mx = st.m;
        if (by_table) {
          float all[KV_BLOCK_TOKENS];
          const E8KVLayer& st8 = *static_cast<const E8KVLayer*>(kv.codec);
          const size_t per = (size_t)(dk / 8) * 65536;
          // Centering: q~ . mean~ and the block's q~ . m~ are the parts of the scores the tables leave out.
          const float* qr = q_rot + ((int64_t)(s.q_begin + i) * a.n_head + kvh * G + g) * dk;
          e8_score_key_block_table(*st8.host, k_slots, tables + ((size_t)(s.q_begin + i) * a.n_head + kvh * G + g) * per,
                                   e8_block_mean_dot(*st8.host, k_slots, qr), all);
          float qmu = 0.f;
          if (st8.mean_rot)
            for (int32_t c = 0; c < dk; ++c) qmu += qr[c] * st8.mean_rot[(size_t)kvh * dk + c];
          for (int32_t j = 0; j < nj; ++j) sc[j] = all[j0 - b * KV_BLOCK_TOKENS + j] + qmu;
        } else {
          math.dots(qv, kbuf.data() + (j0 - b * KV_BLOCK_TOKENS) * dk, nj, dk, sc);
        }
        for (int32_t j = 0; j < nj; ++j) {
          float dot = sc[j] * a.scale;
          if (a.softcap > 0.f) dot = a.softcap * std::tanh(dot / a.softcap);
          sc[j] = dot;
          mx = std::max(mx, dot);
        }
        const float corr = std::exp(st.m - mx);  // exp(-inf) = 0 on the first block
        st.l *= corr;
        if (corr != 1.f) math.scale(ac, corr, dv);  // (×1 is exact: skipping it changes no bit)
        for (int32_t j = 0; j < nj; ++j) sc[j] -= mx;
        math.exp(sc, wt, nj);
        for (int32_t j = 0; j < nj; ++j) st.l += wt[j];
        math.acc_rows(ac, wt, vbuf.data() + (j0 - b * KV_BLOCK_TOKENS) * dv, nj, dv);
        st.m = mx;
      }
    }
  }
  return -1;
}

}  // namespace

void attention(const KVLayerView& kv, const AttentionArgs& a, const AttnSeq* seqs, int32_t n_seqs, const float* q,
               float* out, ThreadPool& pool) {
  const int32_t G = a.n_head / kv.n_head_kv, dv = kv.head_dim_v;
  // Work items: (sequence, kv-head, chunk of blocks). A sequence's visible blocks are split into
  // chunks of kChunkBlocks so one long sequence still feeds every thread.
  constexpr int32_t kChunkBlocks = 32;  // 512 tokens
  struct Item { int32_t seq, kvh, b0, b1, chunk; };
  std::vector<Item> items;
  std::vector<int32_t> first_item(n_seqs + 1);
  for (int32_t si = 0; si < n_seqs; ++si) {
    first_item[si] = (int32_t)items.size();
    const AttnSeq& s = seqs[si];
    const int32_t last = s.pos0 + s.n_q - 1;
    const int32_t lo = a.sliding_window > 0 ? std::max(0, s.pos0 - a.sliding_window + 1) : 0;
    const int32_t bl = lo / KV_BLOCK_TOKENS, bh = last / KV_BLOCK_TOKENS + 1;
    // Chunks are aligned to absolute multiples of kChunkBlocks, so a query's partial sums do not
    // depend on which other queries share the batch (prefill == token by token, bit for bit).
    for (int32_t h = 0; h < kv.n_head_kv; ++h) {
      int32_t c = 0;
      for (int32_t b = bl / kChunkBlocks * kChunkBlocks; b < bh; b += kChunkBlocks, ++c)
        items.push_back({si, h, std::max(b, bl), std::min(bh, b + kChunkBlocks), c});
    }
  }
  first_item[n_seqs] = (int32_t)items.size();

  // Per item: state (n_q*G) and acc (n_q*G*dv).
  std::vector<int64_t> off(items.size() + 1, 0);
  for (size_t i = 0; i < items.size(); ++i) off[i + 1] = off[i] + (int64_t)seqs[items[i].seq].n_q * G;
  std::vector<Partial> state(off.back());
  std::vector<float> acc((size_t)off.back() * dv);

  // E8: every query row rotated once by the layer's R (scores against lattice keys in that basis).
  std::vector<float> q_rot_buf, tables_buf;
  const float* q_rot = q;
  const float* tables = nullptr;
  if (kv.format == KVFormat::E8) {
    int64_t n_rows = 0;
    for (int32_t si = 0; si < n_seqs; ++si) n_rows = std::max<int64_t>(n_rows, seqs[si].q_begin + seqs[si].n_q);
    const E8KVLayer& st = *static_cast<const E8KVLayer*>(kv.codec);
    const int32_t dk = kv.head_dim_k;
    q_rot_buf.resize((size_t)n_rows * a.n_head * dk);
    if (st.scale) {  // centering's per-channel scale: scores are (R (s * q)) . (codes + R (mean / s))
      std::vector<float> qs((size_t)n_rows * a.n_head * dk);
      const int32_t G = a.n_head / kv.n_head_kv;
      for (int64_t r = 0; r < n_rows * a.n_head; ++r)
        for (int32_t c = 0; c < dk; ++c) qs[r * dk + c] = q[r * dk + c] * st.scale[(r % a.n_head) / G * dk + c];
      e8_rotate(st.rot, dk, qs.data(), n_rows * a.n_head, q_rot_buf.data());
    } else {
      e8_rotate(st.rot, dk, q, n_rows * a.n_head, q_rot_buf.data());
    }
    q_rot = q_rot_buf.data();
    // The paper's table scoring (an option, for comparison): decode steps only (one query per
    // sequence), since each query head needs d/8 x 65,536 floats of tables.
    bool decode_step = true;
    for (int32_t si = 0; si < n_seqs; ++si) decode_step = decode_step && seqs[si].n_q == 1;
    if (st.score_tables && decode_step) {
      const size_t per = (size_t)(kv.head_dim_k / 8) * 65536;
      tables_buf.resize((size_t)n_rows * a.n_head * per);
      pool.parallel_for(n_rows * a.n_head, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) e8_build_query_tables(q_rot + r * kv.head_dim_k, kv.head_dim_k, tables_buf.data() + r * per);
      });
      tables = tables_buf.data();
    }
  }
  std::vector<int32_t> bad(items.size(), -1);
  pool.run([&](int ith, int nth) {
    std::vector<float> kbuf, vbuf;
    for (size_t i = ith; i < items.size(); i += nth) {
      const Item& it = items[i];
      bad[i] = attend_chunk(kv, a, seqs[it.seq], it.kvh, it.b0, it.b1, q, q_rot, tables, state.data() + off[i],
                            acc.data() + off[i] * dv, kbuf, vbuf);
    }
  });
  // Exceptions cannot cross the pool's threads: a corrupt tile is reported here.
  for (size_t i = 0; i < items.size(); ++i)
    if (bad[i] >= 0)
      throw Error("kv", "corrupt_tile", strfmt("layer %d kv-head %d block %d: a compressed tile failed validation "
                                               "(reserved tag or escape overrun); refusing to read it", kv.layer,
                                               items[i].kvh, bad[i]));

  // Merge the chunks of each (sequence, kv-head) in chunk order, then normalise.
  for (int32_t si = 0; si < n_seqs; ++si) {
    const AttnSeq& s = seqs[si];
    for (int32_t i = first_item[si]; i < first_item[si + 1]; ++i) {
      const Item& it = items[i];
      if (it.chunk != 0) continue;
      int32_t n_chunks = 1;
      while (i + n_chunks < first_item[si + 1] && items[i + n_chunks].chunk != 0) ++n_chunks;
      for (int32_t r = 0; r < s.n_q * G; ++r) {
        float m = kNegInf;
        for (int32_t c = 0; c < n_chunks; ++c) m = std::max(m, state[off[i + c] + r].m);
        float l = 0.f;
        float* o = out + ((int64_t)(s.q_begin + r / G) * a.n_head + it.kvh * G + r % G) * dv;
        std::fill(o, o + dv, 0.f);
        for (int32_t c = 0; c < n_chunks; ++c) {
          const Partial& p = state[off[i + c] + r];
          if (p.m == kNegInf) continue;
          const float w = std::exp(p.m - m);
          l += p.l * w;
          const float* ac = acc.data() + (off[i + c] + r) * dv;
          for (int32_t d = 0; d < dv; ++d) o[d] += ac[d] * w;
        }
        const float inv = l > 0.f ? 1.f / l : 0.f;
        for (int32_t d = 0; d < dv; ++d) o[d] *= inv;
      }
    }
  }
}

}  // namespace gaacrt::cpu
