// test_vec_dot.cpp — the CPU kernels of issue 2 checked on whatever machine runs them: the best
// SIMD path (AVX2 on x86, NEON under qemu-aarch64 in CI) against the scalar reference for every
// weight type, the scalar reference against exact double math on the dequantized operands, and
// the activation quantizers' defining properties (shared/spec/gguf.md §2.7, §2.9).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/half.h"
#include "cpu/cpu_features.h"
#include "cpu/dequantize.h"
#include "cpu/quantize_act.h"
#include "cpu/vec_dot.h"
#include "quant/blocks.h"
#include "test_harness.h"
#include "test_vec_dot_util.h"

namespace {

using gaacrt::GGMLType;
using gaacrt::strfmt;
using gaacrt::test::kTypes;
using gaacrt::test::random_activations;
using gaacrt::test::random_row;
using gaacrt::test::test_length;
namespace cpu = gaacrt::cpu;

// The activation row as the exact values the integer kernels see: d * q per block.
std::vector<double> dequantize_activations(GGMLType w, const std::vector<uint8_t>& a, int64_t n) {
  std::vector<double> out(n);
  switch (cpu::act_type(w)) {
    case GGMLType::Q8_0: {
      auto* b = reinterpret_cast<const gaacrt::block_q8_0*>(a.data());
      for (int64_t i = 0; i < n; ++i) out[i] = double(gaacrt::fp16_to_f32(b[i / 32].d)) * b[i / 32].qs[i % 32];
      break;
    }
    case GGMLType::Q8_1: {
      auto* b = reinterpret_cast<const gaacrt::block_q8_1*>(a.data());
      for (int64_t i = 0; i < n; ++i) out[i] = double(gaacrt::fp16_to_f32(b[i / 32].d)) * b[i / 32].qs[i % 32];
      break;
    }
    case GGMLType::Q8_K: {
      auto* b = reinterpret_cast<const gaacrt::block_q8_k*>(a.data());
      for (int64_t i = 0; i < n; ++i) out[i] = double(b[i / 256].d) * b[i / 256].qs[i % 256];
      break;
    }
    default: {
      const float* f = reinterpret_cast<const float*>(a.data());
      for (int64_t i = 0; i < n; ++i) out[i] = f[i];
    }
  }
  return out;
}

}  // namespace

TEST_CASE(simd_vec_dot_matches_scalar_for_every_type) {
  const cpu::Isa isa = cpu::best_isa();
  std::printf("       tested isa: %s%s\n", cpu::isa_name(isa),
#if defined(__ARM_FEATURE_DOTPROD)
              " (dotprod)"
#elif defined(__aarch64__)
              " (no dotprod: vmull/vpadal)"
#else
              ""
#endif
  );
  std::mt19937 rng(1234);
  for (GGMLType t : kTypes) {
    const cpu::VecDotFn scalar = cpu::vec_dot_fn(t, cpu::Isa::Scalar), simd = cpu::vec_dot_fn(t, isa);
    if (isa != cpu::Isa::Scalar)  // a SIMD kernel exists for every type: no silent scalar fallback
      CHECK(simd != scalar, strfmt("%s has no %s kernel", gaacrt::type_name(t), cpu::isa_name(isa)));
    for (int blocks : {1, 3, 7}) {
      const int64_t n = test_length(t, blocks);
      double err2 = 0, ref2 = 0;
      for (int row = 0; row < 16; ++row) {
        const std::vector<uint8_t> w = random_row(t, n, rng);
        const std::vector<float> x = random_activations(n, rng);
        std::vector<uint8_t> a(cpu::act_row_bytes(t, n));
        cpu::quantize_act_row(t, x.data(), a.data(), n);
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

TEST_CASE(avx2_kernels_with_and_without_vnni_agree_bit_for_bit) {
  // On a CPU with AVX512-VNNI the AVX2 table uses vpdpbusd for the 32-element types; the plain
  // maddubs+madd kernels must still be right (other CPUs run them) and give the same bits.
  if (!cpu::isa_available(cpu::Isa::AVX2)) {
    std::printf("       not applicable: no AVX2 on this CPU/build\n");
    return;
  }
  std::mt19937 rng(4321);
  int compared = 0;
  for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0, GGMLType::Q5_1, GGMLType::Q8_0, GGMLType::IQ4_NL}) {
    const cpu::VecDotFn best = cpu::vec_dot_avx2(t), plain = cpu::vec_dot_avx2_without_vnni(t);
    const cpu::VecDotFn scalar = cpu::vec_dot_fn(t, cpu::Isa::Scalar);
    CHECK(best && plain, strfmt("%s: missing AVX2 kernel", gaacrt::type_name(t)));
    compared += best != plain;
    const int64_t n = test_length(t, 7);
    for (int row = 0; row < 16; ++row) {
      const std::vector<uint8_t> w = random_row(t, n, rng);
      const std::vector<float> x = random_activations(n, rng);
      std::vector<uint8_t> a(cpu::act_row_bytes(t, n));
      cpu::quantize_act_row(t, x.data(), a.data(), n);
      const float yb = best(n, w.data(), a.data()), yp = plain(n, w.data(), a.data()), ys = scalar(n, w.data(), a.data());
      CHECK(yb == yp, strfmt("%s row %d: %.9g with VNNI, %.9g without", gaacrt::type_name(t), row, yb, yp));
      CHECK(std::fabs(yp - ys) <= 1e-5 * std::fabs(ys) + 1e-6, strfmt("%s row %d: plain AVX2 %.9g, scalar %.9g",
                                                                       gaacrt::type_name(t), row, yp, ys));
    }
  }
  std::printf("       AVX512-VNNI kernels %s\n", compared ? "present: compared with plain AVX2" : "not used on this CPU");
}

TEST_CASE(scalar_vec_dot_equals_exact_dot_of_dequantized_operands) {
  // The integer math loses nothing: the result is Σ deq(w)*deq(a) up to fp32 rounding of the
  // per-block scale products and of the running sum.
  std::mt19937 rng(99);
  for (GGMLType t : kTypes) {
    const int64_t n = test_length(t, 5);
    const cpu::VecDotFn dot = cpu::vec_dot_fn(t, cpu::Isa::Scalar);
    for (int row = 0; row < 8; ++row) {
      const std::vector<uint8_t> w = random_row(t, n, rng);
      const std::vector<float> x = random_activations(n, rng);
      std::vector<uint8_t> a(cpu::act_row_bytes(t, n));
      cpu::quantize_act_row(t, x.data(), a.data(), n);
      std::vector<float> wd(n);
      cpu::dequantize_row(t, w.data(), wd.data(), n);
      const std::vector<double> ad = dequantize_activations(t, a, n);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) { exact += wd[i] * ad[i]; mag += std::fabs(wd[i] * ad[i]); }
      if (cpu::act_type(t) == GGMLType::Q8_1) {
        // Q4_1/Q5_1 apply +m through the activation's s = fp16(d*Σq) (spec §2.7), which is
        // rounded to fp16 by design: the exact value uses s as stored.
        const auto* ab = reinterpret_cast<const gaacrt::block_q8_1*>(a.data());
        const size_t wsize = gaacrt::type_traits(t)->type_size;
        for (int64_t b = 0; b < n / 32; ++b) {
          uint16_t m;
          std::memcpy(&m, &w[b * wsize + 2], 2);
          int sum = 0;
          for (int j = 0; j < 32; ++j) sum += ab[b].qs[j];
          const double s_exact = double(gaacrt::fp16_to_f32(ab[b].d)) * sum;
          exact += double(gaacrt::fp16_to_f32(m)) * (double(gaacrt::fp16_to_f32(ab[b].s)) - s_exact);
        }
      }
      const float got = dot(n, w.data(), a.data());
      CHECK(std::fabs(got - exact) <= 1e-5 * mag + 1e-30,
            strfmt("%s row %d: vec_dot %.9g, exact %.9g (Σ|terms| %.3g)", gaacrt::type_name(t), row, got, exact, mag));
    }
  }
}

TEST_CASE(simd_activation_quantizers_are_bit_identical_to_scalar) {
  const cpu::Isa isa = cpu::best_isa();
  std::mt19937 rng(77);
  for (GGMLType w : {GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q4_K}) {  // Q8_0, Q8_1, Q8_K
    const int64_t n = 256 * 6;
    std::vector<float> x = random_activations(n, rng);
    for (int64_t j = 256; j < 512; ++j) x[j] = 0.0f;                      // all-zero blocks
    for (int64_t j = 512; j < 768; ++j) x[j] = std::round(x[j] * 8) / 8;  // many exact ties
    x[900] = -6.0f; x[950] = 6.0f;                                        // tied |max|, first wins
    for (int64_t j = 1024; j < 1280; ++j) x[j] *= 1e-30f;                 // tiny scales
    std::vector<uint8_t> a(cpu::act_row_bytes(w, n)), b(a.size());
    cpu::quantize_act_row(w, x.data(), a.data(), n, cpu::Isa::Scalar);
    cpu::quantize_act_row(w, x.data(), b.data(), n, isa);
    if (isa != cpu::Isa::Scalar)
      CHECK(cpu::quantize_act_fn(w, isa) != cpu::quantize_act_fn(w, cpu::Isa::Scalar),
            strfmt("%s has no %s activation quantizer", gaacrt::type_name(w), cpu::isa_name(isa)));
    for (size_t k = 0; k < a.size(); ++k)
      CHECK(a[k] == b[k], strfmt("%s activations: byte %zu scalar %d, %s %d", gaacrt::type_name(w), k, a[k],
                                 cpu::isa_name(isa), b[k]));
  }
}

TEST_CASE(q8_k_maps_the_signed_extreme_to_minus_127_and_keeps_bsums) {
  std::mt19937 rng(5);
  std::vector<float> x = random_activations(512, rng);
  x[300] = 7.5f;  // positive extreme in block 1 -> q = -127 with d < 0
  std::vector<gaacrt::block_q8_k> q(2);
  cpu::quantize_row_q8_k(x.data(), q.data(), 512);
  CHECK(q[1].qs[300 - 256] == -127 && q[1].d < 0, strfmt("q = %d, d = %g", q[1].qs[44], q[1].d));
  for (int b = 0; b < 2; ++b) {
    for (int k = 0; k < 16; ++k) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += q[b].qs[16 * k + j];
      CHECK(s == q[b].bsums[k], strfmt("block %d bsums[%d] = %d, Σq = %d", b, k, q[b].bsums[k], s));
    }
    for (int j = 0; j < 256; ++j)  // d*q reconstructs x to within half a step
      CHECK(std::fabs(q[b].d * q[b].qs[j] - x[256 * b + j]) <= 0.5001f * std::fabs(q[b].d),
            strfmt("block %d element %d: x %g, d*q %g", b, j, x[256 * b + j], q[b].d * q[b].qs[j]));
  }
}

TEST_CASE(q8_0_and_q8_1_round_half_away_and_q8_1_carries_d_times_sum) {
  std::vector<float> x(64);
  for (int j = 0; j < 32; ++j) x[j] = float(j - 16) + 0.5f;  // with amax 127 below, d = 1: ties
  x[0] = -127.0f;
  for (int j = 32; j < 64; ++j) x[j] = 0.0f;  // zero block: d = 0, all q = 0
  std::vector<gaacrt::block_q8_0> q0(2);
  std::vector<gaacrt::block_q8_1> q1(2);
  cpu::quantize_row_q8_0(x.data(), q0.data(), 64);
  cpu::quantize_row_q8_1(x.data(), q1.data(), 64);
  int sum = 0;
  for (int j = 1; j < 32; ++j) {
    const int expect = int(std::lround(x[j]));  // lround: half away from zero, like roundf
    CHECK(q0[0].qs[j] == expect && q1[0].qs[j] == expect, strfmt("x %g -> %d / %d", x[j], q0[0].qs[j], q1[0].qs[j]));
  }
  for (int j = 0; j < 32; ++j) sum += q1[0].qs[j];
  CHECK(gaacrt::fp16_to_f32(q1[0].s) == gaacrt::fp16_to_f32(gaacrt::f32_to_fp16(float(sum) * 1.0f)),
        strfmt("s = %g, d*Σq = %d", gaacrt::fp16_to_f32(q1[0].s), sum));
  for (int j = 0; j < 32; ++j) CHECK(q0[1].qs[j] == 0 && q1[1].qs[j] == 0, "zero block quantizes to zeros");
  CHECK(q0[1].d == 0 && q1[1].d == 0 && q1[1].s == 0, "zero block has d = s = 0");
}
