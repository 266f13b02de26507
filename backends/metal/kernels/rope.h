// rope.h — rotary position embedding in place, NORM (adjacent pairs) and NEOX (half split) styles,
// one thread per (token, head, rotated pair). spec/gguf.md §3.1; backends/cpu/rope.cpp is the
// reference, which computes the angles in double. MSL has no double, and p * theta_i in float is
// off by ~1e-7 * p radians (6e-3 at p = 64K), so the angle is carried as two floats: the host
// gives each pair's angle per position, theta_i = freq_scale * base^(-2i/n_rot) / freq_factor_i
// (blended for YaRN), computed in double and split hi + lo; p * theta_i is formed exactly with an
// FMA, reduced modulo 2 pi against a two-float 2 pi, and only the reduced angle (|r| <= pi) goes
// through cos and sin: the rotation matches the CPU's to a few 1e-7.
#pragma once
#include "common.h"
#include "metal/kernels/args.h"

namespace gaacrt {
namespace mtl {

// p * (hi + lo) mod 2 pi, for integer p < 2^24.
inline float rope_angle(float p, float hi, float lo) {
  const float t = p * hi;
  const float t_err = fma(p, hi, -t) + p * lo;     // t + t_err = p * (hi + lo) to ~2^-48 relative
  const float k = rint(t * 0.15915494309189535f);  // turns
  const float two_pi_hi = 6.28318548202514648f, two_pi_lo = -1.74845553e-7f;  // 2 pi = hi + lo
  float r = fma(-k, two_pi_hi, t);                 // one rounding, of a result below 4 in magnitude
  r = fma(-k, two_pi_lo, r);
  return r + t_err;
}

// x(n_tok, n_heads, head_dim); pos(n_tok); theta_hi/theta_lo(n_rot/2).
template <typename T>
kernel void rope(constant RopeArgs& a [[buffer(0)]], device T* x [[buffer(1)]], device const int32_t* pos [[buffer(2)]],
                 device const float* theta_hi [[buffer(3)]], device const float* theta_lo [[buffer(4)]],
                 GAACRT_POSITIONS) {
  const uint half_rot = a.n_rot / 2;
  const uint id = tgpig.x * ROPE_THREADS + tiitg;
  if (id >= a.n_tok * a.n_heads * half_rot) return;
  const uint i = id % half_rot, h = (id / half_rot) % a.n_heads, t = id / (half_rot * a.n_heads);
  const float r = rope_angle((float)pos[t], theta_hi[i], theta_lo[i]);
  const float c = precise::cos(r) * a.mscale, s = precise::sin(r) * a.mscale;
  device T* v = x + ((uint64_t)t * a.n_heads + h) * a.head_dim;
  const uint ia = a.neox ? i : 2 * i, ib = a.neox ? i + half_rot : 2 * i + 1;
  const float x0 = v[ia], x1 = v[ib];
  v[ia] = x0 * c - x1 * s;
  v[ib] = x0 * s + x1 * c;
}

}  // namespace mtl
}  // namespace gaacrt
