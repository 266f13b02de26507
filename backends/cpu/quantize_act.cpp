// quantize_act.cpp — the reference activation quantizers (spec/gguf.md §2.7 and Q16, see
// quantize_act.h), scalar on purpose.
//
// They run once per activation row (n_cols values) while the dot products that follow touch
// n_rows*n_cols weights, so their cost is a rounding error next to the matvec; keeping one
// scalar version for every ISA means every ISA dots the very same integers.
#include "quantize_act.h"

#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/half.h"

namespace gaacrt::cpu {

namespace {

// llama.cpp's nearest_int: adding 1.5*2^23 puts the integer part in the mantissa, so the float
// adder does the rounding (to nearest even). Valid for |v| < 2^22, which |iscale*x| <= 127 is.
inline int nearest_int(float v) {
  const float big = v + 12582912.f;
  int32_t i;
  std::memcpy(&i, &big, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

// Shared by Q8_0 and Q8_1: returns d and writes the 32 quants; Σq goes to *sum.
inline float quantize_block32(const float* x, int8_t* q, int* sum) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {  // llama.cpp's MAX(amax, fabsf(x)), NaN behaviour included
    const float ax = std::fabs(x[j]);
    amax = amax > ax ? amax : ax;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int s = 0;
  for (int j = 0; j < 32; ++j) {
    q[j] = static_cast<int8_t>(std::roundf(x[j] * id));
    s += q[j];
  }
  *sum = s;
  return d;
}

}  // namespace

void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n) {
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    int sum;
    y[i].d = f32_to_fp16(quantize_block32(x + i * QK8_0, y[i].qs, &sum));
  }
}

void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t n) {
  for (int64_t i = 0; i < n / QK8_1; ++i) {
    int sum;
    const float d = quantize_block32(x + i * QK8_1, y[i].qs, &sum);
    y[i].d = f32_to_fp16(d);
    y[i].s = f32_to_fp16(static_cast<float>(sum) * d);
  }
}

void quantize_row_q8_k(const float* x, block_q8_k* y, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    // The *signed* extreme value: iscale = -127/max maps it to exactly -127, so q never hits
    // -128 and the maddubs sign tricks of the SIMD kernels cannot overflow.
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < QK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) { amax = ax; max = x[j]; }
    }
    if (amax == 0.0f) {
      y[i].d = 0.0f;
      std::memset(y[i].qs, 0, sizeof y[i].qs);
      std::memset(y[i].bsums, 0, sizeof y[i].bsums);
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < QK_K; ++j) {
      const int v = nearest_int(iscale * x[j]);
      y[i].qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int k = 0; k < QK_K / 16; ++k) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += y[i].qs[16 * k + j];
      y[i].bsums[k] = static_cast<int16_t>(s);
    }
    y[i].d = 1.0f / iscale;
  }
}

void quantize_row_q16(const float* x, void* dst, int64_t n) {
  const int64_t nb = n / 32;
  float* d = static_cast<float*>(dst);
  float* s = d + nb;
  int16_t* q = reinterpret_cast<int16_t*>(s + nb);
  for (int64_t i = 0; i < nb; ++i, x += 32, q += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float ax = std::fabs(x[j]);
      amax = amax > ax ? amax : ax;
    }
    const float di = amax >= kQ16MinAmax ? amax / 32767.0f : 0.0f;
    const float id = di != 0.0f ? 1.0f / di : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      // |x*id| <= 32767 up to a few ulps, so nearest_int's 2^22 range holds; the clamp only
      // guards against those ulps (and NaN input).
      int v = nearest_int(x[j] * id);
      v = v < -32767 ? -32767 : v > 32767 ? 32767 : v;
      q[j] = static_cast<int16_t>(v);
      sum += v;
    }
    d[i] = di;
    s[i] = di * static_cast<float>(sum);
  }
}

void check_act_bits(int act_bits) {
  if (act_bits != 8 && act_bits != 16)
    throw Error("quant", "bad_act_bits", strfmt("matmul: act_bits = %d; the CPU matmuls quantize activations to 8 or 16 bits",
                                                act_bits));
}

GGMLType act_type(GGMLType w) {
  switch (w) {
    case GGMLType::F32: case GGMLType::F16: case GGMLType::BF16:
      return GGMLType::F32;
    case GGMLType::Q4_0: case GGMLType::Q5_0: case GGMLType::Q8_0: case GGMLType::IQ4_NL:
      return GGMLType::Q8_0;
    case GGMLType::Q4_1: case GGMLType::Q5_1:
      return GGMLType::Q8_1;
    case GGMLType::Q4_K: case GGMLType::Q5_K: case GGMLType::Q6_K: case GGMLType::IQ4_XS:
      return GGMLType::Q8_K;
    default:
      throw Error("quant", "unsupported_type",
                  strfmt("matmul: weight type %s has no CPU matvec kernel", type_name(w)));
  }
}

size_t act_row_bytes(GGMLType w, int64_t n, int act_bits) {
  check_act_bits(act_bits);
  const GGMLType at = act_type(w);
  if (act_bits == 16 && at != GGMLType::F32) return static_cast<size_t>(n / 32) * 8 + static_cast<size_t>(n) * 2;
  switch (at) {
    case GGMLType::Q8_0: return static_cast<size_t>(n / QK8_0) * sizeof(block_q8_0);
    case GGMLType::Q8_1: return static_cast<size_t>(n / QK8_1) * sizeof(block_q8_1);
    case GGMLType::Q8_K: return static_cast<size_t>(n / QK_K) * sizeof(block_q8_k);
    default: return static_cast<size_t>(n) * sizeof(float);
  }
}

#if !(defined(__x86_64__) || defined(_M_X64) || defined(__i386__))
QuantizeRowFn quantize_act_avx2(GGMLType) { return nullptr; }  // quantize_act_avx2.cpp: x86 only
QuantizeRowFn quantize_q16_avx2() { return nullptr; }
#endif
#if !defined(__aarch64__)
QuantizeRowFn quantize_act_neon(GGMLType) { return nullptr; }  // quantize_act_neon.cpp: aarch64 only
QuantizeRowFn quantize_q16_neon() { return nullptr; }
#endif

namespace {
void q8_0_row(const float* x, void* y, int64_t n) { quantize_row_q8_0(x, static_cast<block_q8_0*>(y), n); }
void q8_1_row(const float* x, void* y, int64_t n) { quantize_row_q8_1(x, static_cast<block_q8_1*>(y), n); }
void q8_k_row(const float* x, void* y, int64_t n) { quantize_row_q8_k(x, static_cast<block_q8_k*>(y), n); }
void f32_row(const float* x, void* y, int64_t n) { std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float)); }
}  // namespace

QuantizeRowFn quantize_act_fn(GGMLType w, Isa isa, int act_bits) {
  check_act_bits(act_bits);
  const GGMLType at = act_type(w);
  if (at == GGMLType::F32) return &f32_row;
  QuantizeRowFn fn = nullptr;
  if (act_bits == 16) {
    if (isa_available(isa)) {
      if (isa == Isa::AVX2) fn = quantize_q16_avx2();
      if (isa == Isa::NEON) fn = quantize_q16_neon();
    }
    return fn ? fn : &quantize_row_q16;
  }
  if (isa_available(isa)) {
    if (isa == Isa::AVX2) fn = quantize_act_avx2(at);
    if (isa == Isa::NEON) fn = quantize_act_neon(at);
  }
  if (fn) return fn;
  return at == GGMLType::Q8_0 ? &q8_0_row : at == GGMLType::Q8_1 ? &q8_1_row : &q8_k_row;
}

void quantize_act_row(GGMLType w, const float* x, void* dst, int64_t n, Isa isa, int act_bits) {
  quantize_act_fn(w, isa, act_bits)(x, dst, n);
}

}  // namespace gaacrt::cpu
