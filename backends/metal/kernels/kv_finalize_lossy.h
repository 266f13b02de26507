// kv_finalize_lossy.h — finalize for the fixed-slot lossy formats (shared/spec/e8.md): q8 (Q8_0 per
// 32 channels of a token), KIVI-2 keys (2-bit per channel over the block), 2-bit values (E8 and
// KIVI values, per token and group of 32) — one thread per tile — and E8 keys, one thread per
// (head-block group, token): the whole head rotated (e8_math.h), its norm, then every 8-dim block
// through the portable exact nearest-codeword search (src/codec/e8/e8_encode.h). The loops are
// the host codecs' (src/codec/scalar/scalar_codecs.cpp, src/codec/e8/e8_keys.cpp) over the same
// portable helpers, in the same order: the slots are byte-identical to the CPU backend's
// (tests/metal/finalize_parity.cpp).
#pragma once
#include "common.h"  // first: the portable headers call MSL functions unqualified
#include "codec/e8/e8_encode.h"
#include "codec/e8/e8_layout.h"
#include "codec/scalar/asym2.h"
#include "codec/scalar/q8_tile.h"
#include "metal/kernels/e8_math.h"
#include "metal/kernels/kv_store.h"

namespace gaacrt {
namespace mtl {

inline void st16(device uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

inline void q8_encode_tile_gpu(const device uint16_t* raw, int32_t T, device uint8_t* slot) {
  for (int32_t t = 0; t < KV_BLOCK_TOKENS; ++t)
    for (int32_t g = 0; g < T / Q8_GROUP; ++g) {
      float x[Q8_GROUP];
      for (int32_t i = 0; i < Q8_GROUP; ++i) x[i] = bf16_to_f32(raw[t * T + g * Q8_GROUP + i]);
      const block_q8_0 b = q8_quantize_group(x);
      device uint8_t* dst = slot + q8_block_offset(T, t, g);
      st16(dst, b.d);
      for (int32_t i = 0; i < Q8_GROUP; ++i) dst[2 + i] = (uint8_t)b.qs[i];
    }
}

inline void v2_encode_tile_gpu(const device uint16_t* raw, int32_t T, device uint8_t* slot) {
  for (int32_t t = 0; t < ASYM2_TOKENS; ++t)
    for (int32_t g = 0; g < T / ASYM2_VGROUP; ++g) {
      float v[ASYM2_VGROUP];
      for (int32_t i = 0; i < ASYM2_VGROUP; ++i) v[i] = bf16_to_f32(raw[t * T + g * ASYM2_VGROUP + i]);
      v2_encode_group(v, T, t, g, slot);
    }
}

inline void kivi2_k_encode_tile_gpu(const device uint16_t* raw, int32_t T, device uint8_t* slot) {
  for (int32_t c = 0; c < T; ++c) {
    float mn = bf16_to_f32(raw[c]), mx = mn;
    for (int32_t t = 1; t < ASYM2_TOKENS; ++t) {
      const float v = bf16_to_f32(raw[t * T + c]);
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
    }
    const Asym2Params p = asym2_params(mn, mx);
    uint32_t w = 0;
    for (int32_t t = 0; t < ASYM2_TOKENS; ++t) w |= asym2_code(bf16_to_f32(raw[t * T + c]), p) << (2 * t);
    e8_st32(slot + 4 * c, w);
    device uint8_t* pp = slot + kivi2_k_params_offset(T, c);
    st16(pp, p.scale_bits);
    st16(pp + 2, p.zero_bits);
  }
}

// q8, KIVI-2 and the 2-bit values: one thread per job (E8 key jobs go to kv_finalize_e8_keys).
template <typename T>
kernel void kv_finalize_scalar(constant KVFinalizeArgs& a [[buffer(0)]], device KVFinalizeJob* jobs [[buffer(1)]],
                               device uint8_t* arena [[buffer(2)]], GAACRT_POSITIONS) {
  const uint32_t i = tgpig.x * FINALIZE_THREADS + tiitg;
  if (i >= a.n_jobs) return;
  const KVFormat f = (KVFormat)a.format;
  device KVFinalizeJob& j = jobs[i];
  if (f == KVFormat::E8 && !j.is_v) return;
  const KVLayerView kv = kv_view_of(a, arena, a.chunk_bytes, a.slot_bytes[0], a.slot_bytes[1]);
  const device T* raw = (const device T*)(arena + (uint64_t)j.raw_page * a.page_bytes);
  device uint8_t* slot = kv_entry_ptr(kv, j.slot, j.is_v);
  const int32_t td = (int32_t)a.tile_dim;
  if (f == KVFormat::Q8) q8_encode_tile_gpu(raw, td, slot);
  else if (f == KVFormat::KIVI2 && !j.is_v) kivi2_k_encode_tile_gpu(raw, td, slot);
  else v2_encode_tile_gpu(raw, td, slot);
  j.fits = 1;
  j.escape_bytes = 0;
}

// E8 keys: thread (group, token). The key's halves come from the group's raw pages, the norm is
// written into every half's slot (e8_encode_key_block). The host answers these jobs' `fits`.
template <typename T>
kernel void kv_finalize_e8_keys(constant KVFinalizeArgs& a [[buffer(0)]], device const KVFinalizeJob* jobs [[buffer(1)]],
                                device uint8_t* arena [[buffer(2)]], device const E8KeyGroup* groups [[buffer(3)]],
                                device const float* rot [[buffer(4)]], GAACRT_POSITIONS) {
  const uint32_t id = tgpig.x * FINALIZE_THREADS + tiitg;
  if (id >= a.n_groups * KV_BLOCK_TOKENS) return;
  const device E8KeyGroup& grp = groups[id / KV_BLOCK_TOKENS];
  const int32_t t = (int32_t)(id % KV_BLOCK_TOKENS);
  const KVLayerView kv = kv_view_of(a, arena, a.chunk_bytes, a.slot_bytes[0], a.slot_bytes[1]);
  const uint32_t d = a.dk, td = a.tile_dim;
  float k[ATTN_MAX_DIM], kr[ATTN_MAX_DIM];
  for (uint32_t h = 0; h < a.n_half; ++h) {
    const device T* page = (const device T*)(arena + (uint64_t)jobs[grp.job[h]].raw_page * a.page_bytes);
    for (uint32_t c = 0; c < td; ++c) k[h * td + c] = bf16_to_f32(page[(uint32_t)t * td + c]);
  }
  for (uint32_t i = 0; i < d; ++i) kr[i] = e8_dot8_gpu(rot + (uint64_t)i * d, k, d);
  const float nrm = precise::sqrt(e8_dot8_gpu(kr, kr, d));
  const float s = (nrm > 0.0f && isfinite(nrm)) ? a.alpha / nrm : 0.0f;  // a zero key encodes the zero vector
  for (uint32_t h = 0; h < a.n_half; ++h) {
    device uint8_t* slot = kv_entry_ptr(kv, jobs[grp.job[h]].slot, 0);
    for (uint32_t q = 0; q < td / E8_QUAD_DIMS; ++q) {
      uint32_t c[E8_QUAD];
      for (uint32_t b = 0; b < E8_QUAD; ++b) {
        E8Vec8 x;
        const uint32_t base = h * td + q * E8_QUAD_DIMS + b * E8_BLOCK;
        for (uint32_t i = 0; i < E8_BLOCK; ++i) x.v[i] = kr[base + i] * s;
        c[b] = e8_encode_block(x).code;
      }
      const E8Quad quad = e8_quad_pack(c[0], c[1], c[2], c[3]);
      e8_st32(slot + e8_k_quad_offset((int32_t)td, t, (int32_t)q), quad.proto);
      e8_st32(slot + e8_k_quad_offset((int32_t)td, t, (int32_t)q) + 4, quad.signs);
    }
    e8_st32(slot + e8_k_norm_offset((int32_t)td, t), f32_to_bits(nrm));
  }
}

}  // namespace mtl
}  // namespace gaacrt
