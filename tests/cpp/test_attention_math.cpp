// test_attention_math.cpp — the attention inner loops (backends/cpu/attention_math.h): the set this
// CPU runs against the plain C++ set, the polynomial exp against std::exp over the softmax's
// range, and the properties attention.cpp's bit-exactness rests on (a block of V rows accumulates
// exactly as the same rows one at a time; BF16 converts exactly).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/attention_math.h"
#include "cpu/cpu_features.h"
#include "test_harness.h"

namespace {

using gaacrt::strfmt;
namespace cpu = gaacrt::cpu;

std::vector<float> gaussian(size_t n, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

const cpu::AttentionMath& fast() { return cpu::attention_math(); }
const cpu::AttentionMath& plain() { return cpu::attention_math_scalar(); }

}  // namespace

TEST_CASE(attention_math_uses_the_simd_set_where_the_cpu_has_one) {
  const bool avx2 = cpu::cpu_has_avx2(), neon = cpu::isa_available(cpu::Isa::NEON);
  std::printf("       attention math: %s\n", &fast() == &plain() ? "plain C++" : avx2 ? "avx2" : "neon");
  CHECK(&fast() == (avx2 ? cpu::attention_math_avx2() : neon ? cpu::attention_math_neon() : &plain()),
        "the AVX2 set is chosen on AVX2 CPUs, NEON on aarch64, the plain set elsewhere");
}

TEST_CASE(attention_dots_match_the_plain_dot_products) {
  std::mt19937 rng(11);
  for (int32_t dim : {64, 72, 128, 256, 13}) {
    for (int32_t n_rows : {1, 7, 16}) {
      const std::vector<float> q = gaussian(dim, rng), rows = gaussian(size_t(dim) * n_rows, rng);
      float a[16], b[16];
      fast().dots(q.data(), rows.data(), n_rows, dim, a);
      plain().dots(q.data(), rows.data(), n_rows, dim, b);
      for (int32_t j = 0; j < n_rows; ++j) {
        double mag = 0;
        for (int32_t c = 0; c < dim; ++c) mag += std::fabs(double(q[c]) * rows[size_t(j) * dim + c]);
        CHECK(std::fabs(double(a[j]) - b[j]) <= 1e-6 * mag, strfmt("dim %d row %d: %.9g vs plain %.9g", dim, j, a[j], b[j]));
      }
    }
  }
}

TEST_CASE(attention_exp_is_within_3e_7_of_std_exp_on_the_softmax_range) {
  std::vector<float> x;
  for (float v = -86.0f; v <= 0.0f; v += 0.001953125f) x.push_back(v);  // 44,033 points, 2^-9 apart
  x.push_back(-0.0f);
  std::vector<float> y(x.size());
  fast().exp(x.data(), y.data(), int32_t(x.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = std::exp(double(x[i]));
    worst = std::max(worst, std::fabs(y[i] - ref) / ref);
  }
  CHECK(worst < 3e-7, strfmt("worst relative error %.3g", worst));
  CHECK(y.back() == 1.0f, strfmt("exp(-0) = %.9g", y.back()));
  const float edge[5] = {-INFINITY, -1e30f, -100.0f, -86.5f, 0.0f};
  float out[5];
  fast().exp(edge, out, 5);  // the 5-element tail path too
  for (int k = 0; k < 4; ++k) CHECK(out[k] == 0.0f || out[k] < 1e-37f, strfmt("exp(%g) = %g", edge[k], out[k]));
  CHECK(out[0] == 0.0f, "exp(-inf) = 0: a block's first rescale of the running state must vanish");
  CHECK(out[4] == 1.0f, strfmt("exp(0) = %.9g", out[4]));
}

TEST_CASE(attention_acc_rows_of_a_block_equals_its_rows_one_at_a_time) {
  // attention.cpp relies on a row's contribution not depending on how many rows share the call
  // (queries near the causal edge see fewer keys of the same block).
  std::mt19937 rng(12);
  for (const cpu::AttentionMath* m : {&fast(), &plain()}) {
    for (int32_t dim : {64, 40, 256, 5}) {
      const std::vector<float> rows = gaussian(size_t(16) * dim, rng), w = gaussian(16, rng);
      std::vector<float> y1 = gaussian(dim, rng), y2 = y1, y3 = y1;
      m->acc_rows(y1.data(), w.data(), rows.data(), 16, dim);
      for (int32_t j = 0; j < 16; ++j) m->acc_rows(y2.data(), w.data() + j, rows.data() + size_t(j) * dim, 1, dim);
      plain().acc_rows(y3.data(), w.data(), rows.data(), 16, dim);
      for (int32_t c = 0; c < dim; ++c) {
        CHECK(y1[c] == y2[c], strfmt("dim %d col %d: block %.9g, row by row %.9g", dim, c, y1[c], y2[c]));
        CHECK(std::fabs(y1[c] - y3[c]) <= 1e-5f * (1.0f + std::fabs(y3[c])), strfmt("dim %d col %d: %.9g vs plain %.9g",
                                                                                   dim, c, y1[c], y3[c]));
      }
    }
  }
}

TEST_CASE(attention_scale_and_bf16_conversion_are_exact) {
  std::mt19937 rng(13);
  std::vector<float> a = gaussian(77, rng), b = a;
  fast().scale(a.data(), 0.8125f, 77);
  plain().scale(b.data(), 0.8125f, 77);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0, "scale: one IEEE multiply per element on both sets");
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = uint16_t(i);
  std::vector<float> f(65536 + 3);
  fast().bf16_to_f32(all.data() + 3, f.data(), 65533);  // unaligned start, odd tail
  for (uint32_t i = 3; i < 65536; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &f[i - 3], 4);
    CHECK(bits == i << 16, strfmt("bf16 0x%04x -> 0x%08x", i, bits));
  }
}
