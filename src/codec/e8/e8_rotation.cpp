// e8_rotation.cpp — seeded Haar rotation (spec/e8.md §5.1); the generator is documented in
// e8_rotation.h. Nothing here calls libm except sqrt (correctly rounded by IEEE 754) and frexp
// (exact), so the matrix is the same bits on every platform.
#include "e8_rotation.h"

#include <cmath>

#include "common/error.h"
#include "e8_simd.h"

namespace gaacrt {

namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

constexpr double kLn2 = 0.6931471805599453094;
constexpr double kHalfPi = 1.5707963267948966192;

}  // namespace

E8Prng e8_prng(uint64_t seed, int32_t layer) {
  uint64_t x = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)((int64_t)layer + 1));
  E8Prng g;
  for (auto& w : g.s) w = splitmix64(x);
  return g;
}

uint64_t e8_prng_next(E8Prng& g) {
  uint64_t* s = g.s;
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

// ln x = e ln 2 + ln m with m in [sqrt(1/2), sqrt(2)), and ln m = 2 atanh(s), s = (m-1)/(m+1),
// |s| <= 0.1716: the odd series to s^25 leaves an error below 1e-19, far under an ulp.
double e8_det_log(double x) {
  int e = 0;
  double m = std::frexp(x, &e);  // m in [0.5, 1), exact
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    e -= 1;
  }
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double p = 1.0 / 25.0;
  for (int k = 23; k >= 1; k -= 2) p = p * s2 + 1.0 / (double)k;
  return (double)e * kLn2 + 2.0 * s * p;
}

// The quadrant of 2 pi u is exact (4u is exact in binary); the rest is an angle in [0, pi/2)
// whose sin and cos come from their Taylor series to degree 25 / 24 (error < 1e-19).
void e8_det_sincos_2pi(double u, double* s_out, double* c_out) {
  const double x = 4.0 * u;
  const int q = (int)x;
  const double th = (x - (double)q) * kHalfPi;
  const double t2 = th * th;
  double sp = 1.0, cp = 1.0;
  for (int k = 24; k >= 2; k -= 2) {
    sp = 1.0 - sp * t2 / ((double)k * (double)(k + 1));  // sin = th (1 - th^2/(2*3) (1 - ...))
    cp = 1.0 - cp * t2 / ((double)(k - 1) * (double)k);  // cos = 1 - th^2/(1*2) (1 - ...)
  }
  const double s = th * sp, c = cp;
  switch (q & 3) {
    case 0: *s_out = s; *c_out = c; break;
    case 1: *s_out = c; *c_out = -s; break;
    case 2: *s_out = -s; *c_out = -c; break;
    default: *s_out = -c; *c_out = s; break;
  }
}

void e8_prng_normals(E8Prng& g, double* out, int64_t n) {
  const double inv53 = 1.0 / 9007199254740992.0;  // 2^-53
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = 1.0 - (double)(e8_prng_next(g) >> 11) * inv53;
    const double u2 = (double)(e8_prng_next(g) >> 11) * inv53;
    const double rho = std::sqrt(-2.0 * e8_det_log(u1));
    double s, c;
    e8_det_sincos_2pi(u2, &s, &c);
    out[i] = rho * c;
    if (i + 1 < n) out[i + 1] = rho * s;
  }
}

std::vector<float> e8_haar_rotation(int32_t d, uint64_t seed, int32_t layer) {
  if (d <= 0 || d > 1024 || d % 8 != 0)
    throw Error("e8", "bad_head_dim", strfmt("e8_haar_rotation: head dim %d is not a multiple of 8 in 8..1024", d));
  const size_t n = (size_t)d;
  std::vector<double> g(n * n);
  E8Prng prng = e8_prng(seed, layer);
  e8_prng_normals(prng, g.data(), (int64_t)(n * n));
  // Columns of G, each contiguous: col[j*n + i] = G[i][j].
  std::vector<double> col(n * n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) col[j * n + i] = g[i * n + j];
  for (size_t j = 0; j < n; ++j) {
    double* v = &col[j * n];
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t k = 0; k < j; ++k) {
        const double* qk = &col[k * n];
        // 4 interleaved lanes (n is a multiple of 8): a fixed order, and no add-latency chain.
        double l0 = 0, l1 = 0, l2 = 0, l3 = 0;
        for (size_t i = 0; i < n; i += 4) {
          l0 += qk[i] * v[i];
          l1 += qk[i + 1] * v[i + 1];
          l2 += qk[i + 2] * v[i + 2];
          l3 += qk[i + 3] * v[i + 3];
        }
        const double r = (l0 + l2) + (l1 + l3);
        for (size_t i = 0; i < n; ++i) v[i] -= r * qk[i];
      }
    }
    double nrm = 0.0;
    for (size_t i = 0; i < n; ++i) nrm += v[i] * v[i];
    const double inv = 1.0 / std::sqrt(nrm);
    for (size_t i = 0; i < n; ++i) v[i] *= inv;
  }
  std::vector<float> R(n * n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) R[i * n + j] = (float)col[j * n + i];
  return R;
}

namespace {

void check_rot_dim(int32_t d, const char* op) {
  if (d <= 0 || d % 8 != 0) throw Error("e8", "bad_head_dim", strfmt("%s: head dim %d is not a positive multiple of 8", op, d));
}

}  // namespace

void e8_rotate(const float* R, int32_t d, const float* x, int64_t n, float* y) {
  check_rot_dim(d, "e8_rotate");
  for (int64_t r = 0; r < n; ++r)
    for (int32_t i = 0; i < d; ++i) y[r * d + i] = e8_dot8(R + (size_t)i * d, x + r * d, d);
}

void e8_unrotate(const float* R, int32_t d, const float* x, int64_t n, float* y) {
  check_rot_dim(d, "e8_unrotate");
  // y = R^T x = sum_i x_i R[i][:], accumulated row by row (contiguous, vectorizable, fixed order).
  for (int64_t r = 0; r < n; ++r) {
    float* yr = y + r * d;
    const float* xr = x + r * d;
    for (int32_t j = 0; j < d; ++j) yr[j] = 0.0f;
    for (int32_t i = 0; i < d; ++i) {
      const float xi = xr[i];
      const float* Ri = R + (size_t)i * d;
      for (int32_t j = 0; j < d; ++j) yr[j] += xi * Ri[j];
    }
  }
}

}  // namespace gaacrt
