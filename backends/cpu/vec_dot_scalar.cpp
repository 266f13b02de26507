// vec_dot_scalar.cpp — the reference dot products (shared/spec/gguf.md §2.9), plain C++.
//
// Each block: an exact int32 sum of weight quants × activation quants, then the float scales once.
//   Q4_0/Q5_0/Q8_0/IQ4_NL × Q8_0:  (dw*da) * Σ qw*qa                  (qw already offset: q-8, q-16)
//   Q4_1/Q5_1 × Q8_1:              (dw*da) * Σ qw*qa + mw*sa         (sa = da*Σqa, spec §2.7)
//   Q4_K/Q5_K × Q8_K:              (dw*da) * Σj sc_j Σ qw*qa − (dminw*da) * Σj mn_j Σ qa
//   Q6_K × Q8_K:                   (dw*da) * Σk sc_k Σ (q−32)*qa
//   IQ4_XS × Q8_K:                 (dw*da) * Σj ls_j Σ T[q]*qa
// The SIMD files must reproduce these integers exactly; that is what the tests check.
#include <cstring>

#include "common/half.h"
#include "quant/blocks.h"
#include "quant/dequant.h"  // iq4_xs_scale
#include "vec_dot.h"

namespace gaacrt::cpu {
namespace {

float dot_q4_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q4_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j)
      sumi += ((w[i].qs[j] & 0xF) - 8) * a[i].qs[j] + ((w[i].qs[j] >> 4) - 8) * a[i].qs[j + 16];
    sum += (fp16_to_f32(w[i].d) * fp16_to_f32(a[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

float dot_q4_1(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q4_1*>(vw);
  const auto* a = static_cast<const block_q8_1*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK4_1; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j)
      sumi += (w[i].qs[j] & 0xF) * a[i].qs[j] + (w[i].qs[j] >> 4) * a[i].qs[j + 16];
    sum += (fp16_to_f32(w[i].d) * fp16_to_f32(a[i].d)) * static_cast<float>(sumi) +
           fp16_to_f32(w[i].m) * fp16_to_f32(a[i].s);
  }
  return sum;
}

// Q5_0 / Q5_1: the fifth bit of element j is bit j of the little-endian u32 qh (spec §2.2).
template <typename Block>
int dot_q5_block(const Block& w, const int8_t* qa, int offset) {
  uint32_t qh;
  std::memcpy(&qh, w.qh, 4);
  int sumi = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = (w.qs[j] & 0xF) | (((qh >> j) & 1) << 4);
    const int q1 = (w.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    sumi += (q0 - offset) * qa[j] + (q1 - offset) * qa[j + 16];
  }
  return sumi;
}

float dot_q5_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q5_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK5_0; ++i)
    sum += (fp16_to_f32(w[i].d) * fp16_to_f32(a[i].d)) * static_cast<float>(dot_q5_block(w[i], a[i].qs, 16));
  return sum;
}

float dot_q5_1(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q5_1*>(vw);
  const auto* a = static_cast<const block_q8_1*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK5_1; ++i)
    sum += (fp16_to_f32(w[i].d) * fp16_to_f32(a[i].d)) * static_cast<float>(dot_q5_block(w[i], a[i].qs, 0)) +
           fp16_to_f32(w[i].m) * fp16_to_f32(a[i].s);
  return sum;
}

float dot_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q8_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    int sumi = 0;
    for (int j = 0; j < 32; ++j) sumi += w[i].qs[j] * a[i].qs[j];
    sum += (fp16_to_f32(w[i].d) * fp16_to_f32(a[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

float dot_iq4_nl(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_iq4_nl*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK4_NL; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j)
      sumi += kvalues_iq4nl(w[i].qs[j] & 0xF) * a[i].qs[j] + kvalues_iq4nl(w[i].qs[j] >> 4) * a[i].qs[j + 16];
    sum += (fp16_to_f32(w[i].d) * fp16_to_f32(a[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

// Q4_K and Q5_K share everything but the fifth bit: bit j of qh[l] for element 32j + l (§2.5).
inline int fifth_bit(const block_q4_k&, int, int) { return 0; }
inline int fifth_bit(const block_q5_k& b, int l, int j) { return ((b.qh[l] >> j) & 1) << 4; }

template <typename Block>
float dot_q45_k(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const Block*>(vw);
  const auto* a = static_cast<const block_q8_k*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int sumi = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {  // sub-block j: elements 32j..32j+31, nibbles of chunk j/2 (§2.4)
      uint8_t sc, mn;
      get_scale_min_k4(j, w[i].scales, sc, mn);
      const uint8_t* q = w[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      int dot = 0;
      for (int l = 0; l < 32; ++l)
        dot += (((q[l] >> shift) & 0xF) | fifth_bit(w[i], l, j)) * a[i].qs[32 * j + l];
      sumi += sc * dot;
      summ += mn * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);  // Σ qa over the sub-block
    }
    const float d = fp16_to_f32(w[i].d) * a[i].d, dmin = fp16_to_f32(w[i].dmin) * a[i].d;
    sum += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  return sum;
}

float dot_q6_k(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q6_k*>(vw);
  const auto* a = static_cast<const block_q8_k*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int8_t q[QK_K];  // q - 32, in element order (spec §2.6)
    for (int h = 0; h < 2; ++h) {
      const uint8_t* L = w[i].ql + 64 * h;
      const uint8_t* H = w[i].qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        q[128 * h + l] = static_cast<int8_t>(((L[l] & 0xF) | (((H[l] >> 0) & 3) << 4)) - 32);
        q[128 * h + l + 32] = static_cast<int8_t>(((L[l + 32] & 0xF) | (((H[l] >> 2) & 3) << 4)) - 32);
        q[128 * h + l + 64] = static_cast<int8_t>(((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32);
        q[128 * h + l + 96] = static_cast<int8_t>(((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32);
      }
    }
    int sumi = 0;
    for (int k = 0; k < QK_K / 16; ++k) {
      int dot = 0;
      for (int l = 0; l < 16; ++l) dot += q[16 * k + l] * a[i].qs[16 * k + l];
      sumi += w[i].scales[k] * dot;
    }
    sum += (fp16_to_f32(w[i].d) * a[i].d) * static_cast<float>(sumi);
  }
  return sum;
}

float dot_iq4_xs(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_iq4_xs*>(vw);
  const auto* a = static_cast<const block_q8_k*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int sumi = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* q = w[i].qs + 16 * ib;
      const int8_t* qa = a[i].qs + 32 * ib;
      int dot = 0;
      for (int j = 0; j < 16; ++j)
        dot += kvalues_iq4nl(q[j] & 0xF) * qa[j] + kvalues_iq4nl(q[j] >> 4) * qa[j + 16];
      sumi += iq4_xs_scale(w[i], ib) * dot;
    }
    sum += (fp16_to_f32(w[i].d) * a[i].d) * static_cast<float>(sumi);
  }
  return sum;
}

// Float weights against fp32 activations; 8 partial sums like one AVX2 register (and faster
// than one serial chain). No rounding promise here beyond ordinary fp32 summation.
template <float (*Load)(const void*, int64_t)>
float dot_float(int64_t n, const void* w, const void* va) {
  const float* a = static_cast<const float*>(va);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += Load(w, i + k) * a[i + k];
  for (; i < n; ++i) acc[i % 8] += Load(w, i) * a[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}
float load_f32(const void* w, int64_t i) { return static_cast<const float*>(w)[i]; }
float load_f16(const void* w, int64_t i) { return fp16_to_f32(static_cast<const uint16_t*>(w)[i]); }
float load_bf16(const void* w, int64_t i) { return bf16_to_f32(static_cast<const uint16_t*>(w)[i]); }

}  // namespace

VecDotFn vec_dot_scalar(GGMLType w) {
  switch (w) {
    case GGMLType::F32: return &dot_float<load_f32>;
    case GGMLType::F16: return &dot_float<load_f16>;
    case GGMLType::BF16: return &dot_float<load_bf16>;
    case GGMLType::Q4_0: return &dot_q4_0;
    case GGMLType::Q4_1: return &dot_q4_1;
    case GGMLType::Q5_0: return &dot_q5_0;
    case GGMLType::Q5_1: return &dot_q5_1;
    case GGMLType::Q8_0: return &dot_q8_0;
    case GGMLType::IQ4_NL: return &dot_iq4_nl;
    case GGMLType::Q4_K: return &dot_q45_k<block_q4_k>;
    case GGMLType::Q5_K: return &dot_q45_k<block_q5_k>;
    case GGMLType::Q6_K: return &dot_q6_k;
    case GGMLType::IQ4_XS: return &dot_iq4_xs;
    default: return nullptr;
  }
}

}  // namespace gaacrt::cpu
