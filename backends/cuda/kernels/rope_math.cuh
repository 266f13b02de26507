// rope_math.cuh — RoPE's per-pair arithmetic on the GPU (rope.cu; the fused Q/K/V + RoPE + cache
// store of qkv_rope.cu uses the same, so the two give the same bits) and where a token's K/V
// channel goes in a raw bf16 page (kv_store.cu's layout).
#pragma once
#include <cstdint>

#include "../cuda_common.h"
#include "backend/backend.h"
#include "kv/kv_view.h"

namespace gaacrt::cuda {

struct RopeConst {
  int32_t n_rot, half, style;
  double base;
  double freq_scale;
  float ext_factor, mscale;  // mscale: attn_factor, times the YaRN magnitude correction when on
  float corr0, corr1;        // YaRN ramp ends (dims), from yarn_corr_dims on the host
};

// cos and sin (times mscale) of pair i at position p.
__device__ __forceinline__ void rope_cs(int i, int32_t p, const float* __restrict__ freq_factors, const RopeConst& c,
                                        float& cs, float& sn) {
  double inv_freq = pow(c.base, -2.0 * i / c.n_rot);
  if (freq_factors) inv_freq /= freq_factors[i];
  const double extrap = (double)p * inv_freq;
  double theta = c.freq_scale * extrap;
  if (c.ext_factor != 0.f) {
    const float y = ((2 * i) / 2 - c.corr0) / fmaxf(0.001f, c.corr1 - c.corr0);
    const float ramp = 1.f - fminf(1.f, fmaxf(0.f, y));
    const float mix = ramp * c.ext_factor;
    theta = theta * (1 - mix) + extrap * mix;
  }
  cs = (float)cos(theta) * c.mscale;
  sn = (float)sin(theta) * c.mscale;
}

// The channels a, b of rotation pair i: adjacent (NORM, style 0) or half a rotation apart (NeoX).
__device__ __forceinline__ void rope_channels(int i, const RopeConst& c, int& a, int& b) {
  a = c.style == 0 ? 2 * i : i;
  b = c.style == 0 ? 2 * i + 1 : i + c.half;
}

// (x0, x1) rotated by the angle whose cos and sin are cs, sn (in float, as the CPU reference).
__device__ __forceinline__ void rope_rotate(float& x0, float& x1, float cs, float sn) {
  const float a = x0, b = x1;
  x0 = a * cs - b * sn;
  x1 = a * sn + b * cs;
}

// Where kv_store.cu writes channel c of head h's K (is_v 0) or V (is_v 1) for the token in slot s.
__device__ __forceinline__ uint16_t* bf16_dst(const KVLayerView& kv, const KVTokenSlot& s, int32_t h, int32_t is_v,
                                              int32_t c) {
  const int32_t block = s.pos / KV_BLOCK_TOKENS, row = s.pos % KV_BLOCK_TOKENS;
  const int32_t half = c / kv.tile_dim, cc = c % kv.tile_dim;
  const uint32_t e = s.table[kv_entry_index(kv, h, is_v, half, block)];
  return reinterpret_cast<uint16_t*>(kv.arena + (uint64_t)e * kv.page_bytes) + row * kv.tile_dim + cc;
}

// RopeParams as the kernels take them (throws on an n_rot they cannot rotate).
RopeConst rope_const(const RopeParams& p, int32_t head_dim);
// True when RoPE and the cache store run as one kernel (rope_store_kernel, or inside the Q/K/V
// matvec): no q/k norms, whole-head rotation, K and V of one width in raw bf16 tiles.
bool rope_store_fuses(const float* q_norm, const float* k_norm, const RopeParams& rope, const KVLayerView& kv);

}  // namespace gaacrt::cuda
