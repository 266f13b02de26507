// test_gaac_format.cpp — the portable GAAC tile header (src/codec/gaac/gaac_format.h) on its own:
// word-level steps against the spec's per-element formulas, every BF16 pattern in every mode, and
// corrupt slots placed at the very end of exactly-sized heap buffers so that any read past
// fixed + capacity is caught when this runs under AddressSanitizer (tests/test_gaac_codec.py
// builds it with -fsanitize=address,undefined; it is also part of gaacrt_tests).
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "codec/gaac/gaac_format.h"
#include "codec/gaac/gaac_host.h"
#include "test_harness.h"

namespace {

using namespace gaacrt;

// A buffer of exactly n bytes on the heap: reading byte n is an ASan error.
struct Exact {
  std::unique_ptr<uint8_t[]> p;
  size_t n;
  explicit Exact(size_t n_) : p(new uint8_t[n_ ? n_ : 1]), n(n_) {}
  uint8_t* data() { return p.get(); }
};

uint16_t spec_bf16(uint8_t sm, uint32_t e) {  // spec "Element": the reconstruction formula
  return static_cast<uint16_t>(((sm & 0x80u) << 8) | (e << 7) | (sm & 0x7Fu));
}

TEST_CASE(gaac_bf16x4_matches_the_spec_formula) {
  std::mt19937 rng(1);
  for (int it = 0; it < 200000; ++it) {
    const uint32_t sm = rng(), e = rng();
    const GaacU32x2 r = gaac_bf16x4(sm, e);
    const uint32_t got[4] = {r.lo & 0xFFFF, r.lo >> 16, r.hi & 0xFFFF, r.hi >> 16};
    for (int k = 0; k < 4; ++k) {
      const uint16_t want = spec_bf16(static_cast<uint8_t>(sm >> (8 * k)), (e >> (8 * k)) & 0xFF);
      CHECK(got[k] == want, strfmt("lane %d of sm %08x e %08x: %04x != %04x", k, sm, e, got[k], want));
    }
  }
}

TEST_CASE(gaac_code_words_put_and_get_every_code_of_a_set) {
  std::mt19937 rng(2);
  for (int it = 0; it < 20000; ++it) {
    uint32_t codes[32], set[3] = {0, 0, 0};
    for (int n = 0; n < 32; ++n) codes[n] = rng() & 7;
    for (int gamma = 0; gamma < 4; ++gamma) {  // full 8-bit codes in: only the low 3 bits may land
      GaacU32x2 c = {0, 0};
      for (int m = 0; m < 8; ++m) (m < 4 ? c.lo : c.hi) |= (codes[8 * gamma + m] | (rng() & 0xF8u)) << (8 * (m & 3));
      gaac_put_group_codes(set, gamma, c);
    }
    for (int gamma = 0; gamma < 4; ++gamma) {
      const GaacU32x2 w = gaac_group_codes(set[0], set[1], set[2], gamma);
      for (int m = 0; m < 8; ++m) {
        const uint32_t got = ((m < 4 ? w.lo : w.hi) >> (8 * (m & 3))) & 0xFF;
        CHECK(got == codes[8 * gamma + m], strfmt("code %d: %u != %u", 8 * gamma + m, got, codes[8 * gamma + m]));
      }
    }
  }
}

TEST_CASE(gaac_group_tag_and_codes_match_the_per_element_rule) {
  std::mt19937 rng(6);
  for (int it = 0; it < 200000; ++it) {
    uint16_t v[8];
    uint8_t b3[8], b4[8];
    const uint32_t center = rng() & 0xFF;
    for (int m = 0; m < 8; ++m) {  // exponents and bases near each other, edges 0 and 255 included
      v[m] = static_cast<uint16_t>((rng() & 0x807F) | (((center + rng() % 24 - 12) & 0xFF) << 7));
      b3[m] = static_cast<uint8_t>(center + rng() % 16 - 8);
      b4[m] = static_cast<uint8_t>(center + rng() % 32 - 16);
      if (rng() % 64 == 0) b3[m] = 255;
    }
    bool ok3 = true, ok4 = true;
    uint32_t e[8];
    for (int m = 0; m < 8; ++m) {
      e[m] = (v[m] >> 7) & 0xFF;
      ok3 = ok3 && e[m] >= b3[m] && e[m] - b3[m] <= 7;
      ok4 = ok4 && e[m] >= b4[m] && e[m] - b4[m] <= 15;
    }
    const uint32_t want = ok3 ? 0 : ok4 ? 1 : 2;
    const GaacGroupIn in = gaac_group_load(v);
    const uint32_t tag = gaac_group_tag(in, gaac_bases16(b3, b4));
    CHECK(tag == want, strfmt("tag %u, rule says %u", tag, want));
    const GaacU32x2 c = gaac_group_full_codes(in, tag, gaac_bases16(b3, b4));
    for (int m = 0; m < 8; ++m) {
      const uint32_t base = tag == 0 ? b3[m] : tag == 1 ? b4[m] : 0;
      CHECK((((m < 4 ? c.lo : c.hi) >> (8 * (m & 3))) & 0xFF) == e[m] - base, strfmt("code of channel %d", m));
    }
    const uint32_t x = gaac_group_x(c), r = gaac_group_r(c);
    const GaacU32x2 sx = gaac_spread_x(x), sr = gaac_spread_r(r);
    CHECK(((sx.lo | sr.lo) == (c.lo & 0xF8F8F8F8u)) && ((sx.hi | sr.hi) == (c.hi & 0xF8F8F8F8u)), "x/r round trip");
  }
}

TEST_CASE(gaac_spread_x_and_r_place_high_code_bits_in_byte_lanes) {
  for (uint32_t x = 0; x < 256; ++x) {
    const GaacU32x2 s = gaac_spread_x(x);
    for (int m = 0; m < 8; ++m)
      CHECK((((m < 4 ? s.lo : s.hi) >> (8 * (m & 3))) & 0xFF) == (((x >> m) & 1u) << 3), strfmt("x %u m %d", x, m));
  }
  std::mt19937 rng(3);
  for (int it = 0; it < 10000; ++it) {
    const uint32_t r4 = rng();
    const GaacU32x2 s = gaac_spread_r(r4);
    for (int m = 0; m < 8; ++m) {
      const uint32_t nib = m < 4 ? (r4 >> (8 * m)) & 15 : (r4 >> (8 * (m - 4) + 4)) & 15;
      CHECK((((m < 4 ? s.lo : s.hi) >> (8 * (m & 3))) & 0xFF) == nib << 4, strfmt("r %08x m %d", r4, m));
    }
  }
}

// Every pattern, tiles of one exponent per channel column, bases forcing `mode`.
void roundtrip_all_patterns(int32_t d, int mode) {
  std::mt19937 rng(static_cast<uint32_t>(d * 10 + mode));
  std::vector<uint16_t> cols(65536);
  for (uint32_t i = 0; i < 65536; ++i) cols[((i >> 7) & 0xFF) * 256 + ((i >> 8) & 0x80) + (i & 0x7F)] = static_cast<uint16_t>(i);
  const int32_t n_cols = 65536 / 16, n_tiles = n_cols / d;
  std::vector<int32_t> perm(n_cols);
  for (int32_t i = 0; i < n_cols; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  const uint32_t cap = gaac_max_escape_bytes(d);
  for (int32_t ti = 0; ti < n_tiles; ++ti) {
    std::vector<uint16_t> raw(16 * d);
    std::vector<uint8_t> b3(d), b4(d);
    for (int32_t c = 0; c < d; ++c) {
      const int32_t col = perm[ti * d + c];
      const int32_t e = col / 16;  // 16 columns per exponent
      for (int t = 0; t < 16; ++t) raw[t * d + c] = cols[col * 16 + t];
      const int r8 = static_cast<int>(rng() % 8), r16 = static_cast<int>(rng() % 16);
      if (mode == 0) { b3[c] = static_cast<uint8_t>(e >= r8 ? e - r8 : 0); b4[c] = static_cast<uint8_t>(rng()); }
      if (mode == 1) { b3[c] = static_cast<uint8_t>(e < 255 ? e + 1 : 0); b4[c] = static_cast<uint8_t>(e >= r16 ? e - r16 : 0); }
      if (mode == 2) { b3[c] = b4[c] = static_cast<uint8_t>(e < 255 ? e + 1 : 0); }
    }
    Exact slot(gaac_slot_bytes(d, cap));
    const int32_t esc = gaac_encode_tile(raw.data(), d, d, b3.data(), b4.data(), cap, slot.data());
    const GaacModeCounts mc = gaac_tile_modes(slot.data(), d);
    const uint32_t per_mode[3] = {mc.n3, mc.n4, mc.nraw};
    CHECK(per_mode[mode] == 2u * d, strfmt("d %d tile %d: %u of %d groups in mode %d", d, ti, per_mode[mode], 2 * d, mode));
    CHECK(esc == static_cast<int32_t>(mc.n4 + 5 * mc.nraw), strfmt("escape bytes %d", esc));
    std::vector<uint16_t> back(16 * d);
    const GaacCheck c = gaac_decode_tile(slot.data(), d, cap, b3.data(), b4.data(), back.data(), d);
    CHECK(c.status == GAAC_OK && back == raw, strfmt("d %d mode %d tile %d: status %d or bits differ", d, mode, ti, c.status));
    std::vector<uint16_t> fast(16 * d);
    const GaacCheck cf = gaac_decode_tile_fast(slot.data(), d, cap, b3.data(), b4.data(), fast.data(), d);
    CHECK(cf.status == GAAC_OK && fast == raw, strfmt("fast (%s) decode: d %d mode %d tile %d", gaac_decode_tile_fast_isa(), d, mode, ti));
  }
}

TEST_CASE(gaac_every_bf16_pattern_roundtrips_in_3bit_4bit_and_raw_mode) {
  for (int32_t d : {64, 128})
    for (int mode = 0; mode < 3; ++mode) roundtrip_all_patterns(d, mode);
}

// A real-looking tile (mostly 3-bit, a few 4-bit and raw groups), encoded at exact capacity.
std::vector<uint8_t> sample_slot(int32_t d, std::mt19937& rng, std::vector<uint8_t>& b3, std::vector<uint8_t>& b4,
                                 uint32_t& cap) {
  std::vector<uint16_t> raw(16 * d);
  b3.assign(d, 120);
  b4.assign(d, 116);
  for (auto& v : raw) {
    const uint32_t r = rng() % 1000;
    const uint32_t e = r < 950 ? 120 + rng() % 8 : r < 995 ? 116 + rng() % 16 : rng() % 256;
    v = static_cast<uint16_t>((rng() & 0x807F) | (e << 7));
  }
  std::vector<uint8_t> s(gaac_slot_bytes(d, gaac_max_escape_bytes(d)));
  cap = static_cast<uint32_t>(gaac_encode_tile(raw.data(), d, d, b3.data(), b4.data(), gaac_max_escape_bytes(d), s.data()));
  s.resize(gaac_slot_bytes(d, cap));
  return s;
}

TEST_CASE(gaac_corrupt_slots_are_reported_and_never_read_out_of_bounds) {
  std::mt19937 rng(4);
  int reported[6] = {0, 0, 0, 0, 0, 0};
  for (int it = 0; it < 3000; ++it) {
    const int32_t d = it % 2 ? 64 : 128;
    std::vector<uint8_t> b3, b4;
    uint32_t cap;
    std::vector<uint8_t> good = sample_slot(d, rng, b3, b4, cap);
    // Damage: random tag bytes (reserved tags, more escapes than the capacity) or random bytes
    // everywhere; then hand over exactly fixed + cap bytes.
    const uint32_t tags = gaac_tags_offset(d);
    const int kind = it % 3;
    if (kind == 0) good[tags + rng() % (d / 2)] = static_cast<uint8_t>(rng());
    if (kind == 1) for (auto& b : good) b = static_cast<uint8_t>(rng());
    Exact slot(good.size());
    std::memcpy(slot.data(), good.data(), good.size());
    const GaacCheck v = gaac_validate(slot.data(), static_cast<uint32_t>(good.size()), d, cap, -1);
    std::vector<uint16_t> out(16 * d);
    const GaacCheck dec = gaac_decode_tile(slot.data(), d, cap, b3.data(), b4.data(), out.data(), d);
    std::vector<uint16_t> row_out(d);
    const int32_t t_row = static_cast<int32_t>(rng() % 16);
    const GaacCheck row = gaac_decode_row(slot.data(), d, cap, b3.data(), b4.data(), t_row, row_out.data());
    std::vector<uint16_t> fast_out(16 * d);
    const GaacCheck fast = gaac_decode_tile_fast(slot.data(), d, cap, b3.data(), b4.data(), fast_out.data(), d);
    CHECK(dec.status == v.status && row.status == v.status && fast.status == v.status,
          strfmt("validator says %d, tile decoder %d, row decoder %d, fast decoder %d", v.status, dec.status,
                 row.status, fast.status));
    CHECK(v.status != GAAC_OK || fast_out == out, "fast and reference tile decoders disagree");
    CHECK(v.status != GAAC_OK || std::memcmp(row_out.data(), &out[t_row * d], 2 * static_cast<size_t>(d)) == 0,
          "row and tile decoders disagree");
    ++reported[v.status];
    // Truncated buffers: the validator reads only what it is given.
    const uint32_t short_n = static_cast<uint32_t>(rng() % good.size());
    Exact cut(short_n);
    std::memcpy(cut.data(), good.data(), short_n);
    const GaacCheck t = gaac_validate(cut.data(), short_n, d, cap, -1);
    CHECK(t.status != GAAC_OK, strfmt("a %u-byte prefix of a %zu-byte slot passed", short_n, good.size()));
  }
  CHECK(reported[GAAC_OK] > 0 && reported[GAAC_STATUS_BAD_TAG] > 0 && reported[GAAC_STATUS_ESCAPE_OVERRUN] > 0,
        strfmt("ok %d, bad tag %d, overrun %d: the fuzz must reach each outcome", reported[GAAC_OK],
               reported[GAAC_STATUS_BAD_TAG], reported[GAAC_STATUS_ESCAPE_OVERRUN]));
}

TEST_CASE(gaac_encode_that_does_not_fit_writes_nothing) {
  std::mt19937 rng(5);
  for (int32_t d : {64, 128}) {
    std::vector<uint8_t> b3, b4;
    uint32_t cap;
    sample_slot(d, rng, b3, b4, cap);  // leaves rng at a tile with cap > 0 most of the time
    std::vector<uint16_t> raw(16 * d, static_cast<uint16_t>(250u << 7));  // every group raw
    Exact slot(gaac_slot_bytes(d, 64));
    std::memset(slot.data(), 0x5A, slot.n);
    CHECK(gaac_encode_tile(raw.data(), d, d, b3.data(), b4.data(), 64, slot.data()) == GAAC_DOES_NOT_FIT, "fit?");
    for (size_t i = 0; i < slot.n; ++i) CHECK(slot.data()[i] == 0x5A, strfmt("byte %zu written", i));
    CHECK(gaac_encode_tile(raw.data(), d, 100, b3.data(), b4.data(), 64, slot.data()) == GAAC_BAD_TILE_DIM, "dim 100");
  }
}

}  // namespace
