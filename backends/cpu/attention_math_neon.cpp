// attention_math_neon.cpp — the attention inner loops (attention_math.h) with aarch64 NEON (built
// only for aarch64, where NEON is baseline). Same structure as attention_math_avx2.cpp: dot
// products in 4×4 FMA lanes, V rows accumulated in registers in row order, the same polynomial
// exp (explicit vfmaq, so no contraction choice of the compiler changes it).
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "attention_math.h"

namespace gaacrt::cpu {
namespace {

inline float dot1(const float* q, const float* r, int32_t n) {
  float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0), a2 = vdupq_n_f32(0), a3 = vdupq_n_f32(0);
  int32_t c = 0;
  for (; c + 16 <= n; c += 16) {
    a0 = vfmaq_f32(a0, vld1q_f32(q + c), vld1q_f32(r + c));
    a1 = vfmaq_f32(a1, vld1q_f32(q + c + 4), vld1q_f32(r + c + 4));
    a2 = vfmaq_f32(a2, vld1q_f32(q + c + 8), vld1q_f32(r + c + 8));
    a3 = vfmaq_f32(a3, vld1q_f32(q + c + 12), vld1q_f32(r + c + 12));
  }
  for (; c + 4 <= n; c += 4) a0 = vfmaq_f32(a0, vld1q_f32(q + c), vld1q_f32(r + c));
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
  for (; c < n; ++c) s += q[c] * r[c];
  return s;
}

void dots(const float* q, const float* rows, int32_t n_rows, int32_t dim, float* out) {
  for (int32_t j = 0; j < n_rows; ++j) out[j] = dot1(q, rows + (int64_t)j * dim, dim);
}

// exp as in attention_math_avx2.cpp: 2^k·e^r, Cephes' polynomial, 0 below -86, inf above 88.376.
inline float32x4_t exp4(float32x4_t x) {
  const float32x4_t lo = vdupq_n_f32(-86.0f), hi = vdupq_n_f32(88.3762626647949f);
  const uint32x4_t under = vcltq_f32(x, lo), over = vcgtq_f32(x, hi);
  const float32x4_t xc = vminq_f32(vmaxq_f32(x, lo), hi);
  const float32x4_t k = vrndnq_f32(vmulq_n_f32(xc, 1.44269504088896341f));
  float32x4_t r = vfmsq_f32(xc, k, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, k, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(k), vdupq_n_s32(126)), 23);
  float32x4_t y = vmulq_n_f32(vmulq_f32(p, vreinterpretq_f32_s32(e)), 2.0f);
  y = vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), under));
  return vbslq_f32(over, vdupq_n_f32(INFINITY), y);
}

void exp_n(const float* x, float* y, int32_t n) {
  int32_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, exp4(vld1q_f32(x + i)));
  if (i < n) {  // the tail through one padded vector, so every element takes the same polynomial
    float buf[4] = {0, 0, 0, 0};
    for (int32_t k = i; k < n; ++k) buf[k - i] = x[k];
    vst1q_f32(buf, exp4(vld1q_f32(buf)));
    for (int32_t k = i; k < n; ++k) y[k] = buf[k - i];
  }
}

void scale(float* y, float s, int32_t n) {
  int32_t c = 0;
  for (; c + 4 <= n; c += 4) vst1q_f32(y + c, vmulq_n_f32(vld1q_f32(y + c), s));
  for (; c < n; ++c) y[c] *= s;
}

// y += Σ_j w_j · row_j, 16 columns at a time in registers across all rows (row order kept).
void acc_rows(float* y, const float* w, const float* rows, int32_t n_rows, int32_t dim) {
  int32_t c = 0;
  for (; c + 16 <= dim; c += 16) {
    float32x4_t a0 = vld1q_f32(y + c), a1 = vld1q_f32(y + c + 4), a2 = vld1q_f32(y + c + 8), a3 = vld1q_f32(y + c + 12);
    for (int32_t j = 0; j < n_rows; ++j) {
      const float* r = rows + (int64_t)j * dim + c;
      a0 = vfmaq_n_f32(a0, vld1q_f32(r), w[j]);
      a1 = vfmaq_n_f32(a1, vld1q_f32(r + 4), w[j]);
      a2 = vfmaq_n_f32(a2, vld1q_f32(r + 8), w[j]);
      a3 = vfmaq_n_f32(a3, vld1q_f32(r + 12), w[j]);
    }
    vst1q_f32(y + c, a0);
    vst1q_f32(y + c + 4, a1);
    vst1q_f32(y + c + 8, a2);
    vst1q_f32(y + c + 12, a3);
  }
  for (; c + 4 <= dim; c += 4) {
    float32x4_t a = vld1q_f32(y + c);
    for (int32_t j = 0; j < n_rows; ++j) a = vfmaq_n_f32(a, vld1q_f32(rows + (int64_t)j * dim + c), w[j]);
    vst1q_f32(y + c, a);
  }
  for (; c < dim; ++c)
    for (int32_t j = 0; j < n_rows; ++j) y[c] = std::fma(w[j], rows[(int64_t)j * dim + c], y[c]);
}

void bf16_rows(const uint16_t* src, float* dst, int32_t n) {  // bf16 is the top half of an fp32
  int32_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(src + i), 16)));
  for (; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(dst + i, &u, 4);
  }
}

}  // namespace

const AttentionMath* attention_math_neon() {
  static const AttentionMath m{&dots, &exp_n, &scale, &acc_rows, &bf16_rows};
  return &m;
}

}  // namespace gaacrt::cpu
