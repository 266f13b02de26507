// e8_rotation.h — the seeded per-layer Haar rotation of the E8 key path, reproducible bit for bit
// on every platform (host C++).
//
// Follows shared/spec/e8.md §5.1: k~ = R k with R = Q diag(sign(diag(R_qr))) from the QR
// factorization of a seeded Gaussian d x d matrix; one R per layer, shared by its KV heads and
// applied to queries too. The paper names no PRNG or seed; ours, fixed here so that a cache
// written on one machine decodes on another:
//
//   state   xoshiro256** (Blackman & Vigna), its four words the first four outputs of splitmix64
//           started at  seed XOR (0x9E3779B97F4A7C15 * (layer + 1))   (mod 2^64)
//   uniform u = (next() >> 11) * 2^-53, in [0, 1)
//   normal  Box-Muller on consecutive pairs: u1 = 1 - u_a (in (0, 1]), u2 = u_b,
//           rho = sqrt(-2 ln u1), z0 = rho cos(2 pi u2), z1 = rho sin(2 pi u2);
//           ln, cos and sin are this file's own double-precision series (libm results differ in
//           the last bit between platforms; ours are plain +, -, *, / and so are identical)
//   matrix  G[i][j] = normal number i*d + j (row-major), then Gram-Schmidt on the columns of G
//           in column order, each column orthogonalized twice against the previous ones
//           (modified Gram-Schmidt, "twice is enough"; each projection coefficient summed in 4
//           interleaved lanes, (l0+l2)+(l1+l3)), all in double: Q = G's orthonormalized
//           columns. Gram-Schmidt produces the QR factor with a positive diagonal, which is
//           exactly the spec's sign fix.
//   R       = Q rounded to float32, stored row-major: R[i*d + j] = Q[i][j].
//
// Every step is IEEE double + - * / sqrt in a fixed order (the core builds with
// -ffp-contract=off), so x86-64 and aarch64 produce the same matrix; tests check a checksum of it
// on both (tests/cpp/test_e8_rotation.cpp, run natively and under qemu-aarch64).
#pragma once
#include <cstdint>
#include <vector>

namespace gaacrt {

// Default seed of the E8 cache: the bytes "gaacrtE8".
constexpr uint64_t E8_DEFAULT_SEED = 0x6761616372744538ull;

struct E8Prng {
  uint64_t s[4];
};

E8Prng e8_prng(uint64_t seed, int32_t layer);
uint64_t e8_prng_next(E8Prng& g);
// n standard normal doubles (n even or odd; a pair's unused half is dropped at the end).
void e8_prng_normals(E8Prng& g, double* out, int64_t n);

// The platform-independent elementary functions the generator uses (exposed for tests).
double e8_det_log(double x);                         // x > 0
void e8_det_sincos_2pi(double u, double* s, double* c);  // u in [0, 1)

// R for one layer: d x d float32, row-major (k~_i = sum_j R[i*d + j] k_j). Throws Error("e8",
// "bad_head_dim") unless d is a multiple of 8 in 8..1024.
std::vector<float> e8_haar_rotation(int32_t d, uint64_t seed, int32_t layer);

// y = R x and y = R^T x for n vectors of length d (rows of x, y; x and y must not overlap).
// e8_rotate sums each output in 8 interleaved float lanes combined as
// ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)); e8_unrotate adds x_i R[i][:] for i = 0..d-1 in order.
// d must be a multiple of 8 (Error("e8", "bad_head_dim") otherwise).
void e8_rotate(const float* R, int32_t d, const float* x, int64_t n, float* y);
void e8_unrotate(const float* R, int32_t d, const float* x, int64_t n, float* y);

}  // namespace gaacrt
