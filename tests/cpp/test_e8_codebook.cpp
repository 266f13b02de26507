// test_e8_codebook.cpp — the portable E8 header's pieces checked against each other and against
// a brute-force search (spec/e8.md §1-§4): the GPU half2 decode equals the reference for every
// code, quads round-trip, the encoder's pad list and prototype ranks agree with the packed table,
// and the sorted-type encoder finds the nearest of all 65,536 codewords. Also built for aarch64
// and run under qemu, and under AddressSanitizer (tests/test_e8_cpp.py).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "codec/e8/e8_encode.h"
#include "codec/e8/e8_layout.h"
#include "common/half.h"
#include "test_harness.h"

using namespace gaacrt;

namespace {

uint64_t lcg(uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return s >> 11;
}
float uniform(uint64_t& s) { return (float)((double)lcg(s) / 9007199254740992.0); }

}  // namespace

TEST_CASE(e8_half2_decode_equals_reference_for_every_code) {
  for (uint32_t code = 0; code < 65536; ++code) {
    const uint32_t word = e8_packed_table[code >> 8];
    const E8Vec8 ref = e8_decode_word(word, code);
    const uint32_t sw = e8_signed_word(word, e8_code_spread_flips(code));
    const uint32_t bias = e8_half2_bias(e8_code_parity(code));
    for (int32_t i = 0; i < 4; ++i) {
      const uint32_t h2 = e8_half2_bits(sw, i);
      for (int32_t lane = 0; lane < 2; ++lane) {
        // One fp16 add: both operands and the sum are exact in fp16, so adding in fp32 and
        // rounding back must not change a bit (checked).
        const float a = fp16_to_f32((uint16_t)(h2 >> (16 * lane)));
        const float b = fp16_to_f32((uint16_t)(bias >> (16 * lane)));
        const float sum = a + b;
        CHECK(fp16_to_f32(f32_to_fp16(sum)) == sum, strfmt("code %04x: fp16 add not exact", code));
        CHECK(sum == ref.v[2 * i + lane], strfmt("code %04x dim %d: half2 %g vs reference %g", code, 2 * i + lane,
                                                 sum, ref.v[2 * i + lane]));
      }
    }
  }
}

// The CUDA attention kernel's int8 keys (attention_e8_mma.cuh): every code, in every place of a
// quad beside random neighbours, gives bytes b with 2 b - 15 = 4 g in the dims e8_byte_dim names.
TEST_CASE(e8_quad_block_bytes_equal_the_reference_for_every_code) {
  uint64_t s = 11;
  for (uint32_t code = 0; code < 65536; ++code) {
    const E8Int8x8 ref = e8_decode_x4_word(e8_packed_table[code >> 8], code);
    for (int32_t i = 0; i < 4; ++i) {
      uint32_t c[4];
      for (auto& x : c) x = (uint32_t)(lcg(s) & 0xFFFFu);
      c[i] = code;
      const E8Quad q = e8_quad_pack(c[0], c[1], c[2], c[3]);
      const uint32_t par = e8_quad_parities(q.signs);
      CHECK(((par >> i) & 1u) == e8_code_parity(code), strfmt("code %04x place %d: parity", code, i));
      const E8BytePair b = e8_quad_block_bytes(e8_packed_table[e8_quad_proto(q.proto, i)], q.signs ^ par, par, i);
      for (int32_t k = 0; k < 8; ++k) {
        const int32_t byte = (int32_t)(((k < 4 ? b.lo : b.hi) >> (8 * (k & 3))) & 0xFFu);
        CHECK(byte >= 2 && byte <= 13 && 2 * byte - 15 == ref.v[e8_byte_dim(k)],
              strfmt("code %04x place %d byte %d: %d vs 4g = %d", code, i, k, byte, ref.v[e8_byte_dim(k)]));
      }
    }
  }
}

TEST_CASE(e8_quads_round_trip_codes_and_match_the_block_dot) {
  uint64_t s = 7;
  for (int it = 0; it < 20000; ++it) {
    uint32_t c[4];
    for (auto& x : c) x = (uint32_t)(lcg(s) & 0xFFFFu);
    const E8Quad q = e8_quad_pack(c[0], c[1], c[2], c[3]);
    E8Vec8 qv;
    for (auto& v : qv.v) v = uniform(s) - 0.5f;
    for (int32_t i = 0; i < 4; ++i) {
      CHECK(e8_quad_code(q, i) == c[i], strfmt("block %d: %04x -> %04x", i, c[i], e8_quad_code(q, i)));
      const E8Vec8 g = e8_decode_word(e8_packed_table[c[i] >> 8], c[i]);
      float ref = 0.0f;
      for (int32_t k = 0; k < 8; ++k) ref += qv.v[k] * g.v[k];
      const float got = e8_quad_block_dot(e8_packed_table[e8_quad_proto(q.proto, i)], q.signs, i, qv);
      CHECK(got == ref, strfmt("code %04x: quad dot %.9g vs %.9g", c[i], got, ref));
    }
  }
}

TEST_CASE(e8_encoder_tables_agree_with_the_packed_table) {
  // Ball prototypes: the rank of each row's digits is the row.
  for (int32_t a = 0; a < E8_N_PROTO_BALL; ++a) {
    uint32_t digits = 0;
    for (int32_t i = 0; i < 8; ++i) digits |= (uint32_t)((e8_word_abs_x2(e8_packed_table[a], i) - 1) / 2) << (2 * i);
    CHECK(e8_ball_rank(digits) == (uint32_t)a, strfmt("row %d ranks as %u", a, e8_ball_rank(digits)));
  }
  for (int32_t p = 0; p < E8_N_PADS; ++p) {
    uint32_t mask = 0;
    for (int32_t i = 0; i < 8; ++i) mask |= (uint32_t)(e8_word_abs_x2(e8_packed_table[E8_N_PROTO_BALL + p], i) == 1) << i;
    CHECK(mask == e8_pad_mask(p), strfmt("pad %d: table mask %02x, encoder mask %02x", p, mask, e8_pad_mask(p)));
  }
}

TEST_CASE(e8_encoder_finds_the_nearest_of_all_codewords) {
  std::vector<float> grid((size_t)E8_N_CODES * 8);
  for (uint32_t c = 0; c < (uint32_t)E8_N_CODES; ++c) {
    const E8Vec8 g = e8_decode_word(e8_packed_table[c >> 8], c);
    std::memcpy(&grid[(size_t)c * 8], g.v, sizeof g.v);
  }
  uint64_t s = 99;
  const float scales[3] = {0.3f, 1.04f, 2.5f};
  int checked = 0;
  for (float sc : scales)
    for (int it = 0; it < 100; ++it) {
      E8Vec8 x;
      for (int32_t i = 0; i < 8; i += 2) {  // Box-Muller, float is plenty here
        const float u1 = 1.0f - uniform(s), u2 = uniform(s);
        const float r = sc * std::sqrt(-2.0f * std::log(u1));
        x.v[i] = r * std::cos(6.2831853f * u2);
        x.v[i + 1] = r * std::sin(6.2831853f * u2);
      }
      double best = 1e30, second = 1e30;
      uint32_t arg = 0;
      for (uint32_t c = 0; c < (uint32_t)E8_N_CODES; ++c) {
        double e = 0;
        for (int32_t i = 0; i < 8; ++i) {
          const double dd = (double)x.v[i] - grid[(size_t)c * 8 + i];
          e += dd * dd;
        }
        if (e < best) { second = best; best = e; arg = c; }
        else if (e < second) second = e;
      }
      const E8Encoded enc = e8_encode_block(x);
      if (second - best > 1e-5) {
        CHECK(enc.code == arg, strfmt("scale %g block %d: encoder %04x, brute force %04x", sc, it, enc.code, arg));
        ++checked;
      }
      CHECK(std::fabs(enc.err - best) <= 1e-5 * (1 + best), strfmt("error %.9g vs %.9g", enc.err, best));
    }
  CHECK(checked >= 295, strfmt("only %d of 300 blocks had a clear nearest codeword", checked));
}

TEST_CASE(e8_slot_geometry_matches_the_spec) {
  CHECK(e8_k_slot_bytes(128) == 576 && e8_k_slot_bytes(64) == 320, "K slot bytes");
  CHECK(e8_v_slot_bytes(128) == 768 && e8_v_slot_bytes(64) == 384, "V slot bytes");
  CHECK(e8_k_bytes_per_token_head(128) + e8_v_bytes_per_token_head(128) == 84, "84 B per token-head at d = 128");
  CHECK(e8_n_half(256) == 2 && e8_tile_dim(256) == 128 && e8_n_half(64) == 1, "halves");
  CHECK(!e8_head_dim_ok(80) && !e8_head_dim_ok(160) && e8_head_dim_ok(96) && e8_head_dim_ok(256), "supported dims");
}
