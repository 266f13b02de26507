// attention.h — decode/prefill attention over the paged cache, one template for every cache format
// (the format only picks the tile loader, attention_tiles.h). backends/cpu/attention.cpp is the
// reference and this follows its structure: per work item (sequence, kv-head, chunk of 32 blocks
// aligned to absolute block indices, tile of query tokens) one pass with an online softmax over the
// chunk's blocks, K and V tiles loaded once per block for all the group's query heads; then
// attention_merge combines a row's chunks in chunk order. The partition depends only on lengths
// (host/metal_plan.cpp), never on the format.
//
// Threadgroup: 4 SIMD groups. Per block, SIMD group t loads tile t of the 2 * n_half K/V tiles;
// then SIMD group s owns rows r = s, s+4, .. (row = (query token, group head), at most 4 each):
// lane l scores key l % 16 over half l / 16 of the channels (the halves joined by one shuffle),
// and accumulates channels l, l+32, .. (< dv) of the output.
#pragma once
#include "metal/kernels/attention_tiles.h"
#include "metal/kernels/attention_tiles_lossy.h"

namespace gaacrt {
namespace mtl {

// items(n_items), seqs, tables (staged); q(n_tok, n_head, dk) and q_rot, the same rows in the E8
// rotated basis (bound to q for the other formats); partials(rows, 2 + dv);
// status(n_items, 4): -1, or a block whose compressed tile failed validation.
// kt: [16][dk] tile elements; vt: [16][dv].
template <typename Tiles>
kernel void attention(constant AttnArgs& a [[buffer(0)]], device const AttnItem* items [[buffer(1)]],
                      device const AttnSeqRef* seqs [[buffer(2)]], device const uint32_t* tables [[buffer(3)]],
                      device const float* q [[buffer(4)]], device const float* q_rot [[buffer(5)]],
                      device uint8_t* arena [[buffer(6)]], device const uint8_t* b3k [[buffer(7)]],
                      device const uint8_t* b4k [[buffer(8)]], device const uint8_t* b3v [[buffer(9)]],
                      device const uint8_t* b4v [[buffer(10)]], device float* partials [[buffer(11)]],
                      device int32_t* status [[buffer(12)]], threadgroup typename Tiles::Elem* kt GAACRT_TG_MEM(0),
                      threadgroup typename Tiles::Elem* vt GAACRT_TG_MEM(1), GAACRT_POSITIONS) {
  const device AttnItem& it = items[tgpig.x];
  const device AttnSeqRef& s = seqs[it.seq];
  TileCtx ctx;
  ctx.kv = kv_view_of(a, arena, a.chunk_bytes, a.slot_bytes[0], a.slot_bytes[1]);
  ctx.capacity[0] = a.gaac_capacity[0];
  ctx.capacity[1] = a.gaac_capacity[1];
  ctx.alpha = a.e8_alpha;
  const KVLayerView kv = ctx.kv;
  const device uint32_t* table = tables + s.table;
  const uint32_t G = a.group, R = (uint32_t)it.nq * G, NV = (a.dv + SIMD_WIDTH - 1) / SIMD_WIDTH;
  const uint32_t key = tiisg % 16, khalf = tiisg / 16, dk2 = a.dk / 2;

  float m[ATTN_ROWS_PER_SG], l[ATTN_ROWS_PER_SG], acc[ATTN_ROWS_PER_SG][ATTN_MAX_DIM / SIMD_WIDTH];
  for (uint32_t k = 0; k < ATTN_ROWS_PER_SG; ++k) {
    m[k] = -INFINITY;
    l[k] = 0.0f;
    for (uint32_t c = 0; c < ATTN_MAX_DIM / SIMD_WIDTH; ++c) acc[k][c] = 0.0f;
  }
  int32_t bad = -1;

  for (int32_t b = it.b0; b < it.b1; ++b) {
    if (sgitg < 2 * a.n_half) {
      const int32_t is_v = (int32_t)(sgitg / a.n_half), half = (int32_t)(sgitg % a.n_half);
      const uint32_t e = table[kv_entry_index(kv, (int32_t)it.kvh, is_v, half, b)];
      const uint32_t d = is_v ? a.dv : a.dk;
      const uint32_t off = it.kvh * d + (uint32_t)half * a.tile_dim;
      const bool ok = Tiles::load(ctx, e, is_v, (is_v ? b3v : b3k) + off, (is_v ? b4v : b4k) + off, is_v ? vt : kt, d,
                                  (uint32_t)half * a.tile_dim, tiisg);
      if (!ok && bad < 0) bad = b;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // E8 keys decode in the rotated basis: score them against the rotated queries.
    const bool rotated = Tiles::ROTATED && kv_entry_is_slot(table[kv_entry_index(kv, (int32_t)it.kvh, 0, 0, b)]);
    for (uint32_t k = 0; k < ATTN_ROWS_PER_SG; ++k) {
      const uint32_t r = sgitg + ATTN_SIMDGROUPS * k;
      if (r >= R) break;
      const int32_t i = (int32_t)(r / G), p = s.pos0 + it.q0 + i;
      const int32_t lo = a.sliding_window > 0 ? max(0, p - a.sliding_window + 1) : 0;
      const int32_t j0 = max(b * KV_BLOCK_TOKENS, lo), j1 = min(b * KV_BLOCK_TOKENS + KV_BLOCK_TOKENS, p + 1);
      if (j0 >= j1) continue;  // nothing of this block is visible to the row (uniform in the SIMD group)
      const device float* qv = (rotated ? q_rot : q) + ((uint64_t)(s.q_begin + it.q0 + i) * a.n_head + it.kvh * G + r % G) * a.dk;
      float part = 0.0f;
      for (uint32_t c = khalf * dk2; c < (khalf + 1) * dk2; ++c) part += qv[c] * Tiles::value(kt[key * a.dk + c]);
      float sc = (part + simd_shuffle_xor(part, (ushort)16)) * a.scale;
      if (a.softcap > 0.0f) sc = a.softcap * precise::tanh(sc / a.softcap);
      const int32_t kpos = b * KV_BLOCK_TOKENS + (int32_t)key;
      const bool visible = kpos >= j0 && kpos < j1;
      sc = visible ? sc : -INFINITY;
      const float mx = max(m[k], simd_max(sc));
      const float corr = precise::exp(m[k] - mx);  // exp(-inf) = 0 for the row's first block
      const float pj = visible ? precise::exp(sc - mx) : 0.0f;
      l[k] = l[k] * corr + simd_sum(tiisg < 16 ? pj : 0.0f);
      for (uint32_t c = 0; c < NV; ++c) acc[k][c] *= corr;
      for (int32_t jj = j0 - b * KV_BLOCK_TOKENS; jj < j1 - b * KV_BLOCK_TOKENS; ++jj) {
        const float w = simd_shuffle(pj, (ushort)jj);
        for (uint32_t c = 0; c < NV; ++c)
          if (tiisg + SIMD_WIDTH * c < a.dv) acc[k][c] += w * Tiles::value(vt[(uint32_t)jj * a.dv + tiisg + SIMD_WIDTH * c]);
      }
      m[k] = mx;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);  // the tiles are overwritten by the next block
  }

  if (tiisg == 0) status[tgpig.x * ATTN_SIMDGROUPS + sgitg] = bad;
  for (uint32_t k = 0; k < ATTN_ROWS_PER_SG; ++k) {
    const uint32_t r = sgitg + ATTN_SIMDGROUPS * k;
    if (r >= R) break;
    device float* pr = partials + (uint64_t)(it.partial + r) * (ATTN_PARTIAL_HEADER + a.dv);
    if (tiisg == 0) {
      pr[0] = m[k];
      pr[1] = l[k];
    }
    for (uint32_t c = 0; c < NV; ++c)
      if (tiisg + SIMD_WIDTH * c < a.dv) pr[ATTN_PARTIAL_HEADER + tiisg + SIMD_WIDTH * c] = acc[k][c];
  }
}

// out(n_tok, n_head, dv): one threadgroup per (query token, head), its chunks merged in order.
template <typename T>
kernel void attention_merge(constant AttnArgs& a [[buffer(0)]], device const AttnMergeRow* rows [[buffer(1)]],
                            device const T* partials [[buffer(2)]], device T* out [[buffer(3)]], GAACRT_POSITIONS) {
  const device AttnMergeRow& r = rows[tgpig.x];
  const uint32_t pitch = ATTN_PARTIAL_HEADER + a.dv;
  float mx = -INFINITY;
  for (uint32_t c = 0; c < r.n_chunks; ++c) mx = max(mx, partials[(uint64_t)(r.first + c * r.stride) * pitch]);
  float l = 0.0f;
  for (uint32_t c = 0; c < r.n_chunks; ++c) {
    const device T* p = partials + (uint64_t)(r.first + c * r.stride) * pitch;
    if (p[0] == -INFINITY) continue;
    l += p[1] * precise::exp(p[0] - mx);
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (uint32_t d = tiitg; d < a.dv; d += MERGE_THREADS) {
    float o = 0.0f;
    for (uint32_t c = 0; c < r.n_chunks; ++c) {
      const device T* p = partials + (uint64_t)(r.first + c * r.stride) * pitch;
      if (p[0] == -INFINITY) continue;
      o += p[ATTN_PARTIAL_HEADER + d] * precise::exp(p[0] - mx);
    }
    out[(uint64_t)r.out_row * a.dv + d] = o * inv;
  }
}

}  // namespace mtl
}  // namespace gaacrt
