// quantize_act_neon.cpp — the Q8_0/Q8_1/Q8_K and Q16 activation quantizers with NEON, bit-identical
// to the scalar reference in quantize_act.cpp (llama.cpp's quantize_row_q8_*_ref; Q16) for finite input.
// NEON has both rounding rules as instructions: vrndaq (FRINTA) is roundf's half-away-from-zero,
// vrndnq (FRINTN) is the ties-to-even that Q8_K's nearest_int computes.
#include <arm_neon.h>

#include <cstring>

#include "common/half.h"
#include "quantize_act.h"

namespace gaacrt::cpu {
namespace {

// Eight int32x4 (32 values in order) -> 32 int8 in order (values are within ±127: no saturation).
inline void store_i8x32(int8_t* dst, const int32x4_t q[8]) {
  const int16x8_t h0 = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
  const int16x8_t h1 = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
  const int16x8_t h2 = vcombine_s16(vmovn_s32(q[4]), vmovn_s32(q[5]));
  const int16x8_t h3 = vcombine_s16(vmovn_s32(q[6]), vmovn_s32(q[7]));
  vst1q_s8(dst, vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));
  vst1q_s8(dst + 16, vcombine_s8(vmovn_s16(h2), vmovn_s16(h3)));
}

inline float quantize_block32(const float* x, int8_t* q, int* sum) {
  float32x4_t v[8];
  float32x4_t m = vdupq_n_f32(0.0f);
  for (int k = 0; k < 8; ++k) {
    v[k] = vld1q_f32(x + 4 * k);
    m = vmaxq_f32(m, vabsq_f32(v[k]));
  }
  const float amax = vmaxvq_f32(m);
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int32x4_t qi[8];
  int32x4_t s = vdupq_n_s32(0);
  for (int k = 0; k < 8; ++k) {
    qi[k] = vcvtq_s32_f32(vrndaq_f32(vmulq_n_f32(v[k], id)));
    s = vaddq_s32(s, qi[k]);
  }
  store_i8x32(q, qi);
  *sum = vaddvq_s32(s);
  return d;
}

void q8_0_row(const float* x, void* vy, int64_t n) {
  block_q8_0* y = static_cast<block_q8_0*>(vy);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    int sum;
    y[i].d = f32_to_fp16(quantize_block32(x + i * QK8_0, y[i].qs, &sum));
  }
}

void q8_1_row(const float* x, void* vy, int64_t n) {
  block_q8_1* y = static_cast<block_q8_1*>(vy);
  for (int64_t i = 0; i < n / QK8_1; ++i) {
    int sum;
    const float d = quantize_block32(x + i * QK8_1, y[i].qs, &sum);
    y[i].d = f32_to_fp16(d);
    y[i].s = f32_to_fp16(static_cast<float>(sum) * d);
  }
}

void q8_k_row(const float* x, void* vy, int64_t n) {
  block_q8_k* y = static_cast<block_q8_k*>(vy);
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int k = 0; k < 64; ++k) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + 4 * k)));
    const float amax = vmaxvq_f32(m);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    float max = 0.0f;  // the first element with the largest |x|, as the reference's scan finds it
    for (int j = 0; j < QK_K; ++j)
      if ((x[j] < 0 ? -x[j] : x[j]) == amax) { max = x[j]; break; }
    const float iscale = -127.0f / max;
    const int32x4_t lim = vdupq_n_s32(127);
    for (int g = 0; g < 8; ++g) {
      int32x4_t qi[8];
      for (int k = 0; k < 8; ++k)
        qi[k] = vminq_s32(vcvtq_s32_f32(vrndnq_f32(vmulq_n_f32(vld1q_f32(x + 32 * g + 4 * k), iscale))), lim);
      store_i8x32(y[i].qs + 32 * g, qi);
      y[i].bsums[2 * g] = static_cast<int16_t>(vaddvq_s32(vaddq_s32(vaddq_s32(qi[0], qi[1]), vaddq_s32(qi[2], qi[3]))));
      y[i].bsums[2 * g + 1] = static_cast<int16_t>(vaddvq_s32(vaddq_s32(vaddq_s32(qi[4], qi[5]), vaddq_s32(qi[6], qi[7]))));
    }
    y[i].d = 1.0f / iscale;
  }
}

// Q16 (quantize_act.h): vcvtnq (FCVTNS) rounds to nearest with ties to even, as the scalar
// nearest_int does; the clamp to ±32767 is the scalar one.
void q16_row(const float* x, void* dst, int64_t n) {
  const int64_t nb = n / 32;
  float* d = static_cast<float*>(dst);
  float* s = d + nb;
  int16_t* q = reinterpret_cast<int16_t*>(s + nb);
  const int32x4_t lim = vdupq_n_s32(32767), nlim = vdupq_n_s32(-32767);
  for (int64_t i = 0; i < nb; ++i, x += 32, q += 32) {
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int k = 0; k < 8; ++k) {
      v[k] = vld1q_f32(x + 4 * k);
      m = vmaxq_f32(m, vabsq_f32(v[k]));
    }
    const float amax = vmaxvq_f32(m);
    const float di = amax >= kQ16MinAmax ? amax / 32767.0f : 0.0f;
    const float id = di != 0.0f ? 1.0f / di : 0.0f;
    int32x4_t sum = vdupq_n_s32(0);
    for (int k = 0; k < 8; k += 2) {
      const int32x4_t a = vmaxq_s32(vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(v[k], id)), lim), nlim);
      const int32x4_t b = vmaxq_s32(vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(v[k + 1], id)), lim), nlim);
      vst1q_s16(q + 4 * k, vcombine_s16(vmovn_s32(a), vmovn_s32(b)));
      sum = vaddq_s32(sum, vaddq_s32(a, b));
    }
    d[i] = di;
    s[i] = di * static_cast<float>(vaddvq_s32(sum));
  }
}

}  // namespace

QuantizeRowFn quantize_q16_neon() { return &q16_row; }

QuantizeRowFn quantize_act_neon(GGMLType act) {
  switch (act) {
    case GGMLType::Q8_0: return &q8_0_row;
    case GGMLType::Q8_1: return &q8_1_row;
    case GGMLType::Q8_K: return &q8_k_row;
    default: return nullptr;
  }
}

}  // namespace gaacrt::cpu
