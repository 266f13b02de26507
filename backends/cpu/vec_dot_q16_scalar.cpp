// vec_dot_q16_scalar.cpp — the reference dot products of quantized weights with Q16 activations
// (int16, one fp32 scale d_a and one sum s_a = d_a·Σq_a per 32 values; quantize_act.h), plain C++.
//
// Per 32-value activation block the integer products are summed exactly, then the float scales
// are applied once:
//   Q4_0/Q5_0/Q8_0/IQ4_NL:  (dw*da) * Σ qw*qa                           (qw already offset: q-8, q-16)
//   Q4_1/Q5_1:              (dw*da) * Σ qw*qa + mw*sa
//   Q4_K/Q5_K (per 256):    dw * Σj da_j * (sc_j * Σ qw*qa) − dmin * Σj mn_j * sa_j
//   Q6_K (per 256):         dw * Σj da_j * (Σ_{k=2j,2j+1} sc_k * Σ (q−32)*qa)
//   IQ4_XS (per 256):       dw * Σj da_j * (ls_j * Σ T[q]*qa)
// Overflow: a 32-value sum of 5-bit weights against int16 is < 31·32767·32 ≈ 3.3e7, and times a
// 6-bit K-quant scale < 2.05e9, still an int32; IQ4_XS (|T| <= 127, |ls| <= 32) and Q6_K's two
// 16-value halves with int8 scales can reach 4.3e9, so their block sums are int64. Unlike the 8-bit path no K-quant
// super-block is one integer: its 8 activation scales differ, so each 32-value block meets its
// own scale (SIMD kernels do the same per block, converting int32 lanes to float before any sum
// across lanes could overflow).
#include <cstring>

#include "common/half.h"
#include "quant/blocks.h"
#include "quant/dequant.h"  // get_scale_min_k4, iq4_xs_scale, kvalues_iq4nl
#include "quantize_act.h"
#include "vec_dot.h"

namespace gaacrt::cpu {
namespace {

// 32-element block types: Block -> the 32 weight integers (offset applied) in element order.
inline void ints_q4_0(const block_q4_0& b, int* q) {
  for (int j = 0; j < 16; ++j) { q[j] = (b.qs[j] & 0xF) - 8; q[j + 16] = (b.qs[j] >> 4) - 8; }
}
inline void ints_q4_1(const block_q4_1& b, int* q) {
  for (int j = 0; j < 16; ++j) { q[j] = b.qs[j] & 0xF; q[j + 16] = b.qs[j] >> 4; }
}
template <typename Block>
inline void ints_q5(const Block& b, int* q, int offset) {  // fifth bit j = bit j of the u32 qh (§2.2)
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int j = 0; j < 16; ++j) {
    q[j] = ((b.qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - offset;
    q[j + 16] = ((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - offset;
  }
}
inline void ints_q5_0(const block_q5_0& b, int* q) { ints_q5(b, q, 16); }
inline void ints_q5_1(const block_q5_1& b, int* q) { ints_q5(b, q, 0); }
inline void ints_q8_0(const block_q8_0& b, int* q) {
  for (int j = 0; j < 32; ++j) q[j] = b.qs[j];
}
inline void ints_iq4_nl(const block_iq4_nl& b, int* q) {
  for (int j = 0; j < 16; ++j) { q[j] = kvalues_iq4nl(b.qs[j] & 0xF); q[j + 16] = kvalues_iq4nl(b.qs[j] >> 4); }
}

inline int dot32(const int* qw, const int16_t* qa) {
  int s = 0;
  for (int j = 0; j < 32; ++j) s += qw[j] * qa[j];
  return s;
}

inline float min_term(const block_q4_1& b, float sa) { return fp16_to_f32(b.m) * sa; }
inline float min_term(const block_q5_1& b, float sa) { return fp16_to_f32(b.m) * sa; }
template <typename Block>
inline float min_term(const Block&, float) { return 0.0f; }

template <typename Block, void (*Ints)(const Block&, int*), bool kMin>
float dot_blocks32(int64_t n, const void* vw, const void* va) {
  const Block* w = static_cast<const Block*>(vw);
  const Q16Row a = q16_row(va, n);
  float sum = 0.0f;
  int q[32];
  for (int64_t i = 0; i < n / 32; ++i) {
    Ints(w[i], q);
    sum += (fp16_to_f32(w[i].d) * a.d[i]) * static_cast<float>(dot32(q, a.q + 32 * i));
    if constexpr (kMin) sum += min_term(w[i], a.s[i]);
  }
  return sum;
}

// Q4_K and Q5_K: sub-block j holds elements 32j..32j+31, the low (j even) or high (j odd)
// nibbles of qs[32*(j/2) ..], fifth bit j of qh[l] for Q5_K (§2.4, §2.5).
inline int fifth_bit(const block_q4_k&, int, int) { return 0; }
inline int fifth_bit(const block_q5_k& b, int l, int j) { return ((b.qh[l] >> j) & 1) << 4; }

template <typename Block>
float dot_q45_k(int64_t n, const void* vw, const void* va) {
  const Block* w = static_cast<const Block*>(vw);
  const Q16Row a = q16_row(va, n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    float sumf = 0.0f, summ = 0.0f;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      get_scale_min_k4(j, w[i].scales, sc, mn);
      const uint8_t* q = w[i].qs + 32 * (j / 2);
      const int16_t* qa = a.q + 256 * i + 32 * j;
      const int shift = 4 * (j % 2);
      int dot = 0;
      for (int l = 0; l < 32; ++l) dot += (((q[l] >> shift) & 0xF) | fifth_bit(w[i], l, j)) * qa[l];
      sumf += a.d[8 * i + j] * static_cast<float>(sc * dot);
      summ += static_cast<float>(mn) * a.s[8 * i + j];
    }
    sum += fp16_to_f32(w[i].d) * sumf - fp16_to_f32(w[i].dmin) * summ;
  }
  return sum;
}

float dot_q6_k(int64_t n, const void* vw, const void* va) {
  const block_q6_k* w = static_cast<const block_q6_k*>(vw);
  const Q16Row a = q16_row(va, n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int q[QK_K];  // q - 32, in element order (spec §2.6)
    for (int h = 0; h < 2; ++h) {
      const uint8_t* L = w[i].ql + 64 * h;
      const uint8_t* H = w[i].qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        q[128 * h + l] = ((L[l] & 0xF) | (((H[l] >> 0) & 3) << 4)) - 32;
        q[128 * h + l + 32] = ((L[l + 32] & 0xF) | (((H[l] >> 2) & 3) << 4)) - 32;
        q[128 * h + l + 64] = ((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32;
        q[128 * h + l + 96] = ((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32;
      }
    }
    float sumf = 0.0f;
    for (int j = 0; j < 8; ++j) {
      int64_t dot = 0;
      for (int k = 2 * j; k < 2 * j + 2; ++k) {
        int d16 = 0;
        for (int l = 0; l < 16; ++l) d16 += q[16 * k + l] * a.q[256 * i + 16 * k + l];
        dot += static_cast<int64_t>(w[i].scales[k]) * d16;
      }
      sumf += a.d[8 * i + j] * static_cast<float>(dot);
    }
    sum += fp16_to_f32(w[i].d) * sumf;
  }
  return sum;
}

float dot_iq4_xs(int64_t n, const void* vw, const void* va) {
  const block_iq4_xs* w = static_cast<const block_iq4_xs*>(vw);
  const Q16Row a = q16_row(va, n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    float sumf = 0.0f;
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* q = w[i].qs + 16 * ib;
      const int16_t* qa = a.q + 256 * i + 32 * ib;
      int dot = 0;
      for (int j = 0; j < 16; ++j)
        dot += kvalues_iq4nl(q[j] & 0xF) * qa[j] + kvalues_iq4nl(q[j] >> 4) * qa[j + 16];
      sumf += a.d[8 * i + ib] * static_cast<float>(static_cast<int64_t>(iq4_xs_scale(w[i], ib)) * dot);
    }
    sum += fp16_to_f32(w[i].d) * sumf;
  }
  return sum;
}

}  // namespace

VecDotFn vec_dot_q16_scalar(GGMLType w) {
  switch (w) {
    case GGMLType::Q4_0: return &dot_blocks32<block_q4_0, ints_q4_0, false>;
    case GGMLType::Q4_1: return &dot_blocks32<block_q4_1, ints_q4_1, true>;
    case GGMLType::Q5_0: return &dot_blocks32<block_q5_0, ints_q5_0, false>;
    case GGMLType::Q5_1: return &dot_blocks32<block_q5_1, ints_q5_1, true>;
    case GGMLType::Q8_0: return &dot_blocks32<block_q8_0, ints_q8_0, false>;
    case GGMLType::IQ4_NL: return &dot_blocks32<block_iq4_nl, ints_iq4_nl, false>;
    case GGMLType::Q4_K: return &dot_q45_k<block_q4_k>;
    case GGMLType::Q5_K: return &dot_q45_k<block_q5_k>;
    case GGMLType::Q6_K: return &dot_q6_k;
    case GGMLType::IQ4_XS: return &dot_iq4_xs;
    default: return nullptr;  // float weights take fp32 activations whatever act_bits says
  }
}

}  // namespace gaacrt::cpu
