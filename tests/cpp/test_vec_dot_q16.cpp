// test_vec_dot_q16.cpp — the Q16-activation kernels (backends/cpu/quantize_act.h, vec_dot_q16_*)
// checked on whatever machine runs them (AVX2 natively, NEON under qemu-aarch64): the best SIMD
// path against the scalar reference for every quantized type, the scalar reference against exact
// double math on the dequantized operands, int32 safety at the extreme values every format can
// hold, and the Q16 quantizer's defining properties, SIMD bit-identical to scalar.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "common/half.h"
#include "cpu/cpu_features.h"
#include "cpu/dequantize.h"
#include "cpu/quantize_act.h"
#include "cpu/vec_dot.h"
#include "quant/blocks.h"
#include "quant/dequant.h"  // get_scale_min_k4
#include "test_harness.h"
#include "test_vec_dot_util.h"

namespace {

using gaacrt::GGMLType;
using gaacrt::strfmt;
using gaacrt::test::random_activations;
using gaacrt::test::random_row;
namespace cpu = gaacrt::cpu;

const GGMLType kQuantTypes[] = {GGMLType::Q4_0,   GGMLType::Q4_1, GGMLType::Q5_0, GGMLType::Q5_1, GGMLType::Q8_0,
                                GGMLType::IQ4_NL, GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::IQ4_XS};

int64_t block_size(GGMLType t) { return gaacrt::type_traits(t)->block_size; }

std::vector<uint8_t> quantize16(GGMLType w, const std::vector<float>& x, cpu::Isa isa = cpu::Isa::Scalar) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> a(cpu::act_row_bytes(w, n, 16));
  cpu::quantize_act_row(w, x.data(), a.data(), n, isa, 16);
  return a;
}

// Σ deq(w)·(d·q) in double, plus Σ|terms|, with the +m / −dmin·mn terms taken through the
// activation sums s as stored (they are fp32-rounded d·Σq by design).
struct Exact {
  double value, magnitude;
};
Exact exact_dot(GGMLType t, const std::vector<uint8_t>& w, const std::vector<uint8_t>& a, int64_t n) {
  std::vector<float> wd(n);
  cpu::dequantize_row(t, w.data(), wd.data(), n);
  const cpu::Q16Row r = cpu::q16_row(a.data(), n);
  Exact e{0, 0};
  for (int64_t i = 0; i < n; ++i) {
    const double term = double(wd[i]) * double(r.d[i / 32]) * r.q[i];
    e.value += term;
    e.magnitude += std::fabs(term);
  }
  // Correct the offset terms from the exact Σ(d·q) to the stored s: m·(s − d·Σq) per block
  // (Q4_1/Q5_1), −dmin·mn_j·(s_j − d_j·Σq_j) per sub-block (Q4_K/Q5_K).
  const size_t bytes = gaacrt::type_traits(t)->type_size;
  for (int64_t b = 0; b < n / 32; ++b) {
    double sum = 0;
    for (int j = 0; j < 32; ++j) sum += r.q[32 * b + j];
    const double ds = double(r.s[b]) - double(r.d[b]) * sum;
    if (t == GGMLType::Q4_1 || t == GGMLType::Q5_1) {
      uint16_t m;
      std::memcpy(&m, &w[b * bytes + 2], 2);
      e.value += double(gaacrt::fp16_to_f32(m)) * ds;
    }
    if (t == GGMLType::Q4_K || t == GGMLType::Q5_K) {
      const uint8_t* blk = &w[(b / 8) * bytes];
      uint16_t dmin;
      std::memcpy(&dmin, blk + 2, 2);
      uint8_t sc[8], mn[8];
      for (int j = 0; j < 8; ++j) gaacrt::get_scale_min_k4(j, blk + 4, sc[j], mn[j]);
      e.value -= double(gaacrt::fp16_to_f32(dmin)) * mn[b % 8] * ds;
    }
  }
  return e;
}

}  // namespace

TEST_CASE(simd_q16_vec_dot_matches_scalar_for_every_type) {
  const cpu::Isa isa = cpu::best_isa();
  std::printf("       tested isa: %s\n", cpu::isa_name(isa));
  std::mt19937 rng(2345);
  for (GGMLType t : kQuantTypes) {
    const cpu::VecDotFn scalar = cpu::vec_dot_fn(t, cpu::Isa::Scalar, 16), simd = cpu::vec_dot_fn(t, isa, 16);
    CHECK(scalar == cpu::vec_dot_q16_scalar(t), strfmt("%s: act_bits 16 does not pick the Q16 kernel", gaacrt::type_name(t)));
    if (isa != cpu::Isa::Scalar)  // a SIMD kernel exists for every type: no silent scalar fallback
      CHECK(simd != scalar, strfmt("%s has no %s Q16 kernel", gaacrt::type_name(t), cpu::isa_name(isa)));
    for (int blocks : {1, 3, 7}) {
      const int64_t n = block_size(t) * blocks;
      double err2 = 0, ref2 = 0;
      for (int row = 0; row < 16; ++row) {
        const std::vector<uint8_t> w = random_row(t, n, rng);
        const std::vector<uint8_t> a = quantize16(t, random_activations(n, rng));
        const float ys = scalar(n, w.data(), a.data()), yv = simd(n, w.data(), a.data());
        err2 += double(ys - yv) * double(ys - yv);
        ref2 += double(ys) * double(ys);
      }
      const double rel = std::sqrt(err2 / ref2);
      CHECK(rel < 1e-5, strfmt("%s n=%lld: %s differs from scalar by %.3g relative L2", gaacrt::type_name(t),
                               (long long)n, cpu::isa_name(isa), rel));
    }
  }
}

TEST_CASE(q16_avx2_kernels_with_and_without_vnni_agree_bit_for_bit) {
  // With AVX512-VNNI the Q16 table uses vpdpwssd; the plain madd kernels (other CPUs run them)
  // must give the same bits, since both form the same exact int32 lanes.
  if (!cpu::isa_available(cpu::Isa::AVX2)) {
    std::printf("       not applicable: no AVX2 on this CPU/build\n");
    return;
  }
  std::mt19937 rng(5432);
  int compared = 0;
  for (GGMLType t : kQuantTypes) {
    const cpu::VecDotFn best = cpu::vec_dot_q16_avx2(t), plain = cpu::vec_dot_q16_avx2_without_vnni(t);
    CHECK(best && plain, strfmt("%s: missing AVX2 Q16 kernel", gaacrt::type_name(t)));
    compared += best != plain;
    const int64_t n = block_size(t) * (block_size(t) == 32 ? 7 : 3);
    for (int row = 0; row < 16; ++row) {
      const std::vector<uint8_t> w = random_row(t, n, rng);
      const std::vector<uint8_t> a = quantize16(t, random_activations(n, rng));
      const float yb = best(n, w.data(), a.data()), yp = plain(n, w.data(), a.data());
      CHECK(yb == yp, strfmt("%s row %d: %.9g with VNNI, %.9g without", gaacrt::type_name(t), row, yb, yp));
    }
  }
  std::printf("       AVX512-VNNI Q16 kernels %s\n", compared ? "present: compared with plain AVX2" : "not used on this CPU");
}

TEST_CASE(scalar_q16_vec_dot_equals_exact_dot_of_dequantized_operands) {
  std::mt19937 rng(98);
  for (GGMLType t : kQuantTypes) {
    const int64_t n = block_size(t) * (block_size(t) == 32 ? 9 : 3);
    const cpu::VecDotFn dot = cpu::vec_dot_q16_scalar(t);
    for (int row = 0; row < 8; ++row) {
      const std::vector<uint8_t> w = random_row(t, n, rng);
      const std::vector<uint8_t> a = quantize16(t, random_activations(n, rng));
      const Exact e = exact_dot(t, w, a, n);
      const float got = dot(n, w.data(), a.data());
      CHECK(std::fabs(got - e.value) <= 1e-5 * e.magnitude + 1e-30,
            strfmt("%s row %d: vec_dot %.9g, exact %.9g (Σ|terms| %.3g)", gaacrt::type_name(t), row, got, e.value, e.magnitude));
    }
  }
}

TEST_CASE(q16_kernels_stay_exact_at_every_formats_extreme_values) {
  // The largest integers each format can hold against activations of ±32767: all-0x00 and
  // all-0xFF quant bytes reach q = 0 / 15 / 31 / 63, Q8_0 ±127/-128, IQ4 grid ends ±127/113, and
  // K-quant scales 63, int8 ±128-ish, IQ4_XS ±32. A 32-value block sum times a scale can exceed
  // int32 (IQ4_XS, Q6_K); a kernel that summed those in int32 would be off by 2^32 here.
  const cpu::Isa isa = cpu::best_isa();
  for (GGMLType t : kQuantTypes) {
    const int64_t n = block_size(t) * (block_size(t) == 32 ? 4 : 2);
    for (uint8_t fill : {uint8_t(0x00), uint8_t(0xFF), uint8_t(0x80), uint8_t(0x7F)}) {
      for (float sign : {1.0f, -1.0f}) for (bool mixed : {false, true}) {
        std::vector<uint8_t> w(gaacrt::row_bytes(t, n), fill);
        const size_t bytes = gaacrt::type_traits(t)->type_size;
        for (size_t off = 0; off < w.size(); off += bytes) {  // plausible scales: d = 1/1024 (dmin too)
          const uint16_t d = gaacrt::f32_to_fp16(1.0f / 1024);
          std::memcpy(&w[off + (t == GGMLType::Q6_K ? 208 : 0)], &d, 2);
          if (t == GGMLType::Q4_1 || t == GGMLType::Q5_1 || t == GGMLType::Q4_K || t == GGMLType::Q5_K)
            std::memcpy(&w[off + 2], &d, 2);
        }
        std::vector<float> x(n);
        for (int64_t i = 0; i < n; ++i) x[i] = sign * (mixed && (i / 16) % 3 == 2 ? -1.0f : 1.0f);  // every q = ±32767
        const std::vector<uint8_t> a = quantize16(t, x);
        const Exact e = exact_dot(t, w, a, n);
        const float ys = cpu::vec_dot_q16_scalar(t)(n, w.data(), a.data());
        const float yv = cpu::vec_dot_fn(t, isa, 16)(n, w.data(), a.data());
        CHECK(std::fabs(ys - e.value) <= 1e-5 * e.magnitude + 1e-30,
              strfmt("%s fill 0x%02x sign %+g mixed %d: scalar %.9g, exact %.9g", gaacrt::type_name(t), fill, sign, mixed,
                     ys, e.value));
        CHECK(std::fabs(yv - e.value) <= 1e-5 * e.magnitude + 1e-30,
              strfmt("%s fill 0x%02x sign %+g mixed %d: %s %.9g, exact %.9g", gaacrt::type_name(t), fill, sign, mixed,
                     cpu::isa_name(isa), yv, e.value));
      }
    }
  }
}

TEST_CASE(q16_quantizer_rounds_to_the_nearest_step_and_keeps_exact_sums) {
  std::mt19937 rng(17);
  const int64_t n = 32 * 7;
  std::vector<float> x = random_activations(n, rng);
  for (int j = 32; j < 64; ++j) x[j] = 0.0f;                  // zero block: d = 0, q = 0, s = 0
  for (int j = 64; j < 96; ++j) x[j] *= 1e-30f;               // tiny scale
  for (int j = 96; j < 128; ++j) x[j] = float(j - 112) + 0.5f;  // with amax below, d = 1: exact ties
  x[96] = -32767.0f;
  x[160] = 1e6f;  // one outlier: the block's other values keep ~1e6/32767 resolution
  for (int j = 192; j < 224; ++j) x[j] *= 1e-35f;  // below kQ16MinAmax: a zero block (1/d would be inf)
  const std::vector<uint8_t> a = quantize16(GGMLType::Q4_0, x);
  CHECK(a.size() == size_t(n / 32) * 8 + size_t(n) * 2, strfmt("Q16 row of %lld values is %zu bytes", (long long)n, a.size()));
  const cpu::Q16Row r = cpu::q16_row(a.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    int sum = 0, qmax = 0;
    for (int j = 0; j < 32; ++j) {
      const int64_t i = 32 * b + j;
      sum += r.q[i];
      qmax = std::max(qmax, std::abs(int(r.q[i])));
      // half a step, plus the few-ulp error of x·(1/d) (|x/d| <= 32767, ~0.004 steps)
      if (b == 6) continue;  // flushed: x is below 1e-34 there
      CHECK(std::fabs(double(r.d[b]) * r.q[i] - x[i]) <= 0.51 * double(r.d[b]),
            strfmt("block %lld element %d: x %.9g, d*q %.9g", (long long)b, j, x[i], double(r.d[b]) * r.q[i]));
    }
    CHECK(r.s[b] == r.d[b] * float(sum), strfmt("block %lld: s %.9g, d*Σq %.9g", (long long)b, r.s[b], r.d[b] * float(sum)));
    const bool zero = b == 1 || b == 6;
    CHECK(zero ? (r.d[b] == 0 && qmax == 0) : qmax == 32767, strfmt("block %lld: max |q| = %d", (long long)b, qmax));
  }
  for (int j = 97; j < 128; ++j) {  // ties go to the even neighbour, like Q8_K's nearest_int
    const double v = x[j];
    const int even = int(std::nearbyint(v));
    CHECK(r.q[j] == even, strfmt("x %g -> %d, expected %d", v, r.q[j], even));
  }
}

TEST_CASE(simd_q16_quantizer_is_bit_identical_to_scalar) {
  const cpu::Isa isa = cpu::best_isa();
  std::mt19937 rng(71);
  const int64_t n = 32 * 40;
  std::vector<float> x = random_activations(n, rng);
  for (int64_t j = 0; j < 32; ++j) x[j] = 0.0f;
  for (int64_t j = 64; j < 192; ++j) x[j] = std::round(x[j] * 4096) / 4096;  // many exact ties
  for (int64_t j = 256; j < 288; ++j) x[j] *= 1e-35f;                          // flushed to zero
  for (int64_t j = 288; j < 320; ++j) x[j] *= 2e-30f;                          // just above the flush
  for (int64_t j = 320; j < 352; ++j) x[j] *= 3e4f;
  x[400] = -1e30f;
  if (isa != cpu::Isa::Scalar)
    CHECK(cpu::quantize_act_fn(GGMLType::Q4_K, isa, 16) != cpu::quantize_act_fn(GGMLType::Q4_K, cpu::Isa::Scalar, 16),
          strfmt("no %s Q16 quantizer", cpu::isa_name(isa)));
  const std::vector<uint8_t> s = quantize16(GGMLType::Q4_K, x), v = quantize16(GGMLType::Q4_K, x, isa);
  for (size_t k = 0; k < s.size(); ++k)
    CHECK(s[k] == v[k], strfmt("Q16 byte %zu: scalar %d, %s %d", k, s[k], cpu::isa_name(isa), v[k]));
}
