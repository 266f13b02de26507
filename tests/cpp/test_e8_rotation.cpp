// test_e8_rotation.cpp — the E8 rotation generator (e8_rotation.h) and the key slots: its own log / sincos agree
// with libm, R is orthogonal, and the matrix bits are the recorded ones. The same program runs
// natively and under qemu-aarch64 (tests/test_e8_cpp.py), so the checksums pin one matrix
// across platforms; a key block encoded on either produces the same slot bytes, and both
// scoring paths match a dense dot product on either SIMD path.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "codec/e8/e8_keys.h"
#include "codec/e8/e8_layout.h"
#include "codec/e8/e8_rotation.h"
#include "common/half.h"
#include "test_harness.h"

using namespace gaacrt;

namespace {

// FNV-1a over the bytes of a float array (little-endian on both platforms tested).
uint64_t fnv1a(const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

// Recorded on x86-64 (gcc, -ffp-contract=off); the aarch64 build must reproduce them.
constexpr uint64_t kRotD128L0 = 0x0304dd4e5531e518ull;
constexpr uint64_t kRotD64L5 = 0x1cef186b39f40a92ull;
constexpr uint64_t kRotD256L17 = 0xa841dd95346f0a80ull;
constexpr uint64_t kSlotsD128 = 0x8987f54912823862ull;

}  // namespace

TEST_CASE(e8_repro_det_log_and_sincos_match_libm) {
  for (int i = 1; i <= 4000; ++i) {
    const double x = std::ldexp((double)i / 4000.0, -(i % 60));
    const double want = std::log(x), got = e8_det_log(x);
    CHECK(std::fabs(got - want) <= 4e-16 * std::fabs(want) + 1e-300, strfmt("log(%.17g): %.17g vs %.17g", x, got, want));
  }
  for (int i = 0; i < 4096; ++i) {
    const double u = (double)i / 4096.0 + 1e-7 * (i % 7);
    double s, c;
    e8_det_sincos_2pi(u, &s, &c);
    CHECK(std::fabs(s - std::sin(2 * M_PI * u)) < 1e-15 && std::fabs(c - std::cos(2 * M_PI * u)) < 1e-15,
          strfmt("sincos(2 pi %.17g)", u));
  }
}

TEST_CASE(e8_rotation_is_orthogonal) {
  for (int32_t d : {64, 128, 256}) {
    const std::vector<float> R = e8_haar_rotation(d, E8_DEFAULT_SEED, 3);
    double worst = 0;
    for (int32_t i = 0; i < d; ++i)
      for (int32_t j = 0; j <= i; ++j) {
        double s = 0;
        for (int32_t k = 0; k < d; ++k) s += (double)R[(size_t)i * d + k] * R[(size_t)j * d + k];
        worst = std::fmax(worst, std::fabs(s - (i == j ? 1.0 : 0.0)));
      }
    CHECK(worst < 1e-6, strfmt("d = %d: |R R^T - I| = %g", d, worst));
  }
}

TEST_CASE(e8_repro_rotation_bits_are_the_recorded_ones) {
  struct Want { int32_t d, layer; uint64_t hash; };
  const Want wants[] = {{128, 0, kRotD128L0}, {64, 5, kRotD64L5}, {256, 17, kRotD256L17}};
  for (const Want& w : wants) {
    const std::vector<float> R = e8_haar_rotation(w.d, E8_DEFAULT_SEED, w.layer);
    const uint64_t h = fnv1a(R.data(), R.size() * sizeof(float));
    CHECK(h == w.hash, strfmt("d = %d layer %d: rotation hash %016llx, recorded %016llx", w.d, w.layer,
                              (unsigned long long)h, (unsigned long long)w.hash));
  }
  // Different layers and seeds give different matrices.
  CHECK(e8_haar_rotation(64, E8_DEFAULT_SEED, 0) != e8_haar_rotation(64, E8_DEFAULT_SEED, 1), "layers differ");
  CHECK(e8_haar_rotation(64, 1, 0) != e8_haar_rotation(64, 2, 0), "seeds differ");
}

TEST_CASE(e8_repro_key_slots_are_the_recorded_bytes) {
  const E8LayerCodec c = e8_layer_codec(128, 2);
  std::vector<float> k(16 * 128);
  for (size_t i = 0; i < k.size(); ++i) k[i] = (float)((int)((i * 2654435761u) % 2001) - 1000) / 500.0f;
  std::vector<uint8_t> slot(e8_k_slot_bytes(128));
  uint8_t* slots[1] = {slot.data()};
  e8_encode_key_block(c, k.data(), slots);
  const uint64_t h = fnv1a(slot.data(), slot.size());
  CHECK(h == kSlotsD128, strfmt("slot hash %016llx, recorded %016llx", (unsigned long long)h, (unsigned long long)kSlotsD128));
}

// The scoring paths on this platform's SIMD (SSE2 on x86-64, NEON on aarch64) against a double
// dot product with the decoded keys: s = <q, k^> = <R q, R k^>.
TEST_CASE(e8_repro_scores_match_dense_decode) {
  for (int32_t d : {64, 256}) {
    const E8LayerCodec c = e8_layer_codec(d, 1);
    const int32_t T = e8_tile_dim(d), nh = e8_n_half(d);
    std::vector<float> k(16 * (size_t)d), q(2 * (size_t)d), qr(2 * (size_t)d), kh(16 * (size_t)d);
    for (size_t i = 0; i < k.size(); ++i) k[i] = (float)((int)((i * 40503u) % 997) - 498) / 100.0f;
    for (size_t i = 0; i < q.size(); ++i) q[i] = (float)((int)((i * 9973u) % 211) - 105) / 50.0f;
    std::vector<uint8_t> buf(nh * (size_t)e8_k_slot_bytes(T));
    std::vector<uint8_t*> s(nh);
    std::vector<const uint8_t*> cs(nh);
    for (int32_t h = 0; h < nh; ++h) cs[h] = s[h] = buf.data() + h * e8_k_slot_bytes(T);
    e8_encode_key_block(c, k.data(), s.data());
    e8_decode_key_block(c, cs.data(), kh.data());
    e8_rotate(c.rot.data(), d, q.data(), 2, qr.data());
    std::vector<float> sb(32), table((size_t)(d / 8) * 65536), sa(16);
    e8_score_key_block(c, cs.data(), qr.data(), 2, sb.data());
    for (int32_t hq = 0; hq < 2; ++hq) {
      e8_build_query_tables(qr.data() + hq * d, d, table.data());
      e8_score_key_block_table(c, cs.data(), table.data(), 0.0f, sa.data());
      for (int32_t t = 0; t < 16; ++t) {
        double ref = 0, qn = 0, kn = 0;
        for (int32_t i = 0; i < d; ++i) {
          ref += (double)q[hq * d + i] * kh[t * d + i];
          qn += (double)q[hq * d + i] * q[hq * d + i];
          kn += (double)kh[t * d + i] * kh[t * d + i];
        }
        const double tol = 1e-5 * std::sqrt(qn * kn);
        CHECK(std::fabs(sb[hq * 16 + t] - ref) <= tol, strfmt("d %d head %d token %d: (B) %.7g vs %.7g", d, hq, t, sb[hq * 16 + t], ref));
        CHECK(std::fabs(sa[t] - ref) <= tol, strfmt("d %d head %d token %d: (A) %.7g vs %.7g", d, hq, t, sa[t], ref));
      }
    }
  }
}
