// gaac_format.h — the GAAC tile: byte layout, the word-level decode steps every kernel uses, and
// reference encode / decode / validate of one tile (portable: C++, CUDA and MSL include this file).
//
// Follows shared/spec/gaac.md ("Element", "Groups and modes", "Tile", "Slots"); the in-tile
// arrangement of the streams is this file's choice, drawn below. The escape area is cut into two
// sub-streams (both in group order), which the spec leaves to the implementation.
//
// ---- Element and group (spec) --------------------------------------------------------------
// bf16 = s:1 | e:8 | m:7. The byte sm = s<<7 | m is kept as is; e is coded per group of 8
// consecutive channels of one token with a 2-bit tag: 0 = 3-bit code e - b3, 1 = 4-bit code
// e - b4, 2 = raw (code e), 3 = reserved (corruption). The low 3 bits of every code go to the
// common code stream; a 4-bit group adds 1 escape byte, a raw group 5.
//
// ---- Who reads what: the lane map --------------------------------------------------------------
// A tile of D channels (D = tile_dim, a multiple of 8, at most 128) has G = D/8 group columns and
// is read by L = D/4 lanes (a warp for D = 128, half a warp for D = 64). Lane l owns ONE group
// column g = l % G for the whole kernel (its 8 b3 and 8 b4 bases stay in registers) and the
// 8 groups j = 0..7 of that column at tokens
//     t(l, j) = 4*(j/2) + 2*h + (j%2),     h = l / G  (0: tokens 0,1,4,5,8,9,12,13; 1: the rest)
// Every stream below is laid out so that "lane l reads its part" is one coalesced warp load.
//
// ---- Slot bytes (D = 128: L = 32; D = 64: L = 16, every offset halves) -----------------------
//   offset            bytes   content
//   0                 16*D    sign+mantissa: chunk k = i*L + l (i = 0..3) is 16 bytes =
//                             [token t(l,2i): 8 sm bytes of channels 8g..8g+7]
//                             [token t(l,2i+1): 8 sm bytes]. Load i of the warp: lane l reads
//                             16 bytes at 16*(i*L + l) -> 32 lanes x 16 B = 512 contiguous bytes.
//   16*D   (2048)     4*D     code words W0..W3 of lane l at 16*l (one 16-byte load per lane)
//   20*D   (2560)     2*D     code words W4..W5 of lane l at 8*l  (one 8-byte load per lane)
//   22*D   (2816)     D/2     tags: uint16 of lane l at 2*l; bits 2j..2j+1 = tag of group j
//   22.5*D (2880)     C       escape area (capacity C, calibrated), only n_esc bytes used:
//                             X stream: 1 byte per group with tag 1 or 2, in group order
//                                       (bit m = bit 3 of the code of channel m)
//                             R stream: from byte n_x on, 4 bytes per raw group, in group order
//                                       (byte b: low nibble = code bits 4..7 of channel b,
//                                        high nibble = code bits 4..7 of channel b+4)
//   Group order is lane-major: q = 8*l + j. n_esc = n_x + 4*n_raw = n_4bit + 5*n_raw, exactly
//   the spec's count. Fixed part = 22.5*D bytes: 2880 for D = 128, 1440 for D = 64; for D a
//   multiple of 32 every offset is a multiple of 16, so slots of fixed + C bytes (C a multiple of
//   16) keep 16-byte alignment. A BF16 tile is 32*D bytes.
//
// ---- Code words: 32 three-bit codes in 3 words, 4 exponents per 32-bit add -------------------
// Lane l's groups j = 0..3 use words (W0, W1, W2) = (A, B, C), groups 4..7 use (W3, W4, W5).
// Within a set, code n = 8*(j%4) + channel (0..31) sits at:
//   n  0..23: word n/8, byte lane n%4, bits 3*((n/4)%2) .. +2      (two whole codes per byte)
//   n 24..27: byte lane n-24: bits 0,1 in A bits 6,7; bit 2 in B bit 6
//   n 28..31: byte lane n-28: bits 0,1 in C bits 6,7; bit 2 in B bit 7
// so the codes of 4 channels come out in byte lanes with a shift and a mask (gaac_group_codes),
// and e = base + code is ONE 32-bit add for 4 channels: no carries cross byte lanes because the
// encoder only picks a mode when base + code = e <= 255.
//
// ---- Why the escapes are split into X and R ---------------------------------------------------
// 4-bit groups occur in most warp passes, raw groups in few. With every tag-1/2 group's first
// escape byte in one stride-1 stream, the 4-bit path needs only the count of tag-1/2 groups
// before a group (one prefix count over the tags); the raw path adds a second count and reads
// one 4-byte record whose nibbles drop straight into byte lanes (N & 0x0F0F0F0F, N & 0xF0F0F0F0).
// A GPU reader: per lane popc of its tag masks, one warp exclusive scan of (n_x | n_raw << 16),
// then per group predicated loads — no branches, no per-group variable strides.
#pragma once
#include "../../common/portable.h"

namespace gaacrt {

constexpr int32_t GAAC_TILE_TOKENS = 16;
constexpr int32_t GAAC_GROUP = 8;              // channels per group
constexpr int32_t GAAC_MAX_TILE_DIM = 128;
constexpr int32_t GAAC_LANE_GROUPS = 8;        // groups one lane owns
constexpr int32_t GAAC_MAX_LANES = GAAC_MAX_TILE_DIM / 4;

constexpr uint32_t GAAC_TAG_3BIT = 0, GAAC_TAG_4BIT = 1, GAAC_TAG_RAW = 2, GAAC_TAG_RESERVED = 3;
constexpr uint32_t GAAC_ESC_BYTES_4BIT = 1, GAAC_ESC_BYTES_RAW = 5;

// Encoder results (>= 0 is the number of escape bytes used).
constexpr int32_t GAAC_DOES_NOT_FIT = -1;     // escapes exceed the slot capacity: keep the tile raw
constexpr int32_t GAAC_BAD_TILE_DIM = -2;

// Decoder / validator status.
enum GaacStatus : int32_t {
  GAAC_OK = 0,
  GAAC_STATUS_BAD_TAG = 1,          // a group carries the reserved tag 3 (detail: group index q)
  GAAC_STATUS_ESCAPE_OVERRUN = 2,   // the tags need more escape bytes than the capacity (detail: bytes)
  GAAC_STATUS_TRUNCATED = 3,        // the buffer ends before the fixed part or the escapes it needs
  GAAC_STATUS_ESCAPE_MISMATCH = 4,  // escape bytes differ from the count recorded at encode time
  GAAC_STATUS_BAD_TILE_DIM = 5,
};

struct GaacU32x2 { uint32_t lo, hi; };     // 8 byte lanes: channels 0..3 and 4..7 of a group
struct GaacCheck { int32_t status; int32_t detail; };
struct GaacModeCounts { uint32_t n3, n4, nraw, nbad; };

// ---- geometry ---------------------------------------------------------------------------------
GAACRT_HD bool gaac_tile_dim_ok(int32_t d) { return d >= 8 && d <= GAAC_MAX_TILE_DIM && d % 8 == 0; }
GAACRT_HD int32_t gaac_lanes(int32_t d) { return d / 4; }
GAACRT_HD int32_t gaac_group_cols(int32_t d) { return d / 8; }
GAACRT_HD uint32_t gaac_codes_a_offset(int32_t d) { return 16u * (uint32_t)d; }
GAACRT_HD uint32_t gaac_codes_b_offset(int32_t d) { return 20u * (uint32_t)d; }
GAACRT_HD uint32_t gaac_tags_offset(int32_t d) { return 22u * (uint32_t)d; }
GAACRT_HD uint32_t gaac_fixed_bytes(int32_t d) { return 22u * (uint32_t)d + (uint32_t)d / 2u; }
GAACRT_HD uint32_t gaac_slot_bytes(int32_t d, uint32_t capacity) { return gaac_fixed_bytes(d) + capacity; }
GAACRT_HD uint32_t gaac_raw_tile_bytes(int32_t d) { return 2u * GAAC_TILE_TOKENS * (uint32_t)d; }
GAACRT_HD uint32_t gaac_max_escape_bytes(int32_t d) { return GAAC_ESC_BYTES_RAW * 2u * (uint32_t)d; }

constexpr uint32_t GAAC_FIXED_BYTES_64 = 1440, GAAC_FIXED_BYTES_128 = 2880;
GAACRT_STATIC_ASSERT(22 * 64 + 32 == GAAC_FIXED_BYTES_64, "fixed part, D = 64");
GAACRT_STATIC_ASSERT(22 * 128 + 64 == GAAC_FIXED_BYTES_128, "fixed part, D = 128");
GAACRT_STATIC_ASSERT(2048 + 768 + 64 == GAAC_FIXED_BYTES_128, "spec table: sm + codes + tags");

// Lane map (see the header comment).
GAACRT_HD int32_t gaac_lane_col(int32_t d, int32_t lane) { return lane % gaac_group_cols(d); }
GAACRT_HD int32_t gaac_lane_token(int32_t d, int32_t lane, int32_t j) {
  return 4 * (j >> 1) + 2 * (lane / gaac_group_cols(d)) + (j & 1);
}
GAACRT_HD int32_t gaac_token_lane(int32_t d, int32_t t, int32_t g) { return ((t >> 1) & 1) * gaac_group_cols(d) + g; }
GAACRT_HD int32_t gaac_token_j(int32_t t) { return 2 * (t >> 2) + (t & 1); }
GAACRT_HD uint32_t gaac_sm_offset(int32_t d, int32_t lane, int32_t j) {
  return 16u * (uint32_t)((j >> 1) * gaac_lanes(d) + lane) + 8u * (uint32_t)(j & 1);
}
GAACRT_HD uint32_t gaac_code_word_offset(int32_t d, int32_t lane, int32_t w) {
  return w < 4 ? gaac_codes_a_offset(d) + 16u * (uint32_t)lane + 4u * (uint32_t)w
               : gaac_codes_b_offset(d) + 8u * (uint32_t)lane + 4u * (uint32_t)(w - 4);
}
// Lane `lane`'s 16 tag bits (2 per group, group j at bits 2j..2j+1) in a tag stream (BF16 and FP8
// tiles alike), and in a BF16 tile's slot.
GAACRT_HD uint32_t gaac_tag_word(const GAACRT_DEVICE uint8_t* tags, int32_t lane) {
  return (uint32_t)tags[2 * lane] | ((uint32_t)tags[2 * lane + 1] << 8);
}
GAACRT_HD uint32_t gaac_lane_tags(const GAACRT_DEVICE uint8_t* slot, int32_t d, int32_t lane) {
  return gaac_tag_word(slot + gaac_tags_offset(d), lane);
}

// ---- bit helpers --------------------------------------------------------------------------------
GAACRT_HD uint32_t gaac_popc(uint32_t x) {
#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
  return (uint32_t)__popc(x);
#elif defined(__METAL_VERSION__)
  return popcount(x);
#elif defined(__GNUC__) || defined(__clang__)
  return (uint32_t)__builtin_popcount(x);
#else
  x = x - ((x >> 1) & 0x55555555u);
  x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
  return (((x + (x >> 4)) & 0x0F0F0F0Fu) * 0x01010101u) >> 24;
#endif
}

// Little-endian loads and stores from byte pointers (slots are byte streams on every backend).
GAACRT_HD uint32_t gaac_ld32(const GAACRT_DEVICE uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
GAACRT_HD void gaac_st32(GAACRT_DEVICE uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

// ---- tags ---------------------------------------------------------------------------------------
// The 16 tag bits of one lane as three masks on the even bit positions 2j: groups with escapes
// (tag 1 or 2), raw groups (tag 2), reserved tags (tag 3). Group j's prefix is mask & ((1<<2j)-1).
struct GaacTagMasks { uint32_t x, raw, bad; };
GAACRT_HD GaacTagMasks gaac_tag_masks(uint32_t tags16) {
  const uint32_t b0 = tags16 & 0x5555u, b1 = (tags16 >> 1) & 0x5555u;
  GaacTagMasks m;
  m.x = b0 | b1;
  m.raw = b1 & ~b0;
  m.bad = b0 & b1;
  return m;
}
GAACRT_HD uint32_t gaac_lane_escape_bytes(uint32_t tags16) {
  const GaacTagMasks m = gaac_tag_masks(tags16);
  return gaac_popc(m.x) + 4u * gaac_popc(m.raw);
}

// ---- the decode of one group, in words ------------------------------------------------------
// Byte-lane low-3-bit codes of group j%4 = gamma of a lane's code set (a, b, c).
GAACRT_HD GaacU32x2 gaac_group_codes(uint32_t a, uint32_t b, uint32_t c, int32_t gamma) {
  const uint32_t m = 0x07070707u;
  GaacU32x2 r;
  if (gamma == 0) { r.lo = a & m; r.hi = (a >> 3) & m; }
  else if (gamma == 1) { r.lo = b & m; r.hi = (b >> 3) & m; }
  else if (gamma == 2) { r.lo = c & m; r.hi = (c >> 3) & m; }
  else {
    r.lo = ((a >> 6) & 0x03030303u) | ((b >> 4) & 0x04040404u);
    r.hi = ((c >> 6) & 0x03030303u) | ((b >> 5) & 0x04040404u);
  }
  return r;
}

// Bit 3 of the 8 codes (an X byte) spread into byte lanes: bit m -> bit 3 of lane m. The four
// shifted copies made by the multiply occupy disjoint bits, so no carries.
GAACRT_HD GaacU32x2 gaac_spread_x(uint32_t x) {
  GaacU32x2 r;
  r.lo = ((x & 15u) * 0x01020408u) & 0x08080808u;
  r.hi = (((x >> 4) & 15u) * 0x01020408u) & 0x08080808u;
  return r;
}

// Bits 4..7 of the 8 codes from an R record (little-endian 4 bytes) into byte lanes.
GAACRT_HD GaacU32x2 gaac_spread_r(uint32_t r4) {
  GaacU32x2 r;
  r.lo = (r4 & 0x0F0F0F0Fu) << 4;
  r.hi = r4 & 0xF0F0F0F0u;
  return r;
}

// Exponents of one group in byte lanes. Branch-free contract: pass x = 0 for a tag-0 group and
// r4 = 0 for a non-raw group (a predicated load that did not happen); base(raw) = 0.
GAACRT_HD GaacU32x2 gaac_group_exponents(uint32_t tag, GaacU32x2 b3, GaacU32x2 b4, GaacU32x2 low3,
                                         uint32_t x, uint32_t r4) {
  const GaacU32x2 sx = gaac_spread_x(x), sr = gaac_spread_r(r4);
  const uint32_t base_lo = tag == GAAC_TAG_3BIT ? b3.lo : (tag == GAAC_TAG_4BIT ? b4.lo : 0u);
  const uint32_t base_hi = tag == GAAC_TAG_3BIT ? b3.hi : (tag == GAAC_TAG_4BIT ? b4.hi : 0u);
  GaacU32x2 e;
  e.lo = base_lo + (low3.lo | sx.lo | sr.lo);
  e.hi = base_hi + (low3.hi | sx.hi | sr.hi);
  return e;
}

// Four BF16 values from 4 sm bytes and 4 exponents (byte lanes): returns two bf16x2 words,
// channels (0,1) and (2,3). High byte of a bf16 = s | e>>1, low byte = (e&1)<<7 | m.
GAACRT_HD GaacU32x2 gaac_bf16x4(uint32_t sm, uint32_t e) {
  const uint32_t hb = (sm & 0x80808080u) | ((e >> 1) & 0x7F7F7F7Fu);
  const uint32_t lb = ((e << 7) & 0x80808080u) | (sm & 0x7F7F7F7Fu);
  GaacU32x2 r;
#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
  r.lo = __byte_perm(lb, hb, 0x5140);
  r.hi = __byte_perm(lb, hb, 0x7362);
#else
  r.lo = (lb & 0xFFu) | ((hb & 0xFFu) << 8) | ((lb & 0xFF00u) << 8) | ((hb & 0xFF00u) << 16);
  r.hi = ((lb >> 16) & 0xFFu) | ((hb >> 8) & 0xFF00u) | ((lb >> 8) & 0xFF0000u) | (hb & 0xFF000000u);
#endif
  return r;
}

// ---- the encode of one group --------------------------------------------------------------------
// A group's 8 BF16 values in 16-bit lanes: word k holds elements 2k (low half) and 2k+1. In a
// 16-bit lane (e | 0x100) - b = 256 + e - b cannot borrow from its neighbour, and e - b lies in
// 0..w-1 (w a power of two) exactly when that lane is in [256, 256 + w) — two lanes per test.
struct GaacGroupIn { uint32_t e[4]; uint32_t sm[4]; };

GAACRT_HD GaacGroupIn gaac_group_load(const GAACRT_DEVICE uint16_t* v) {
  GaacGroupIn g;
  for (int k = 0; k < 4; ++k) {
    const uint32_t p = (uint32_t)v[2 * k] | ((uint32_t)v[2 * k + 1] << 16);
    g.e[k] = (p >> 7) & 0x00FF00FFu;
    g.sm[k] = ((p >> 8) & 0x00800080u) | (p & 0x007F007Fu);
  }
  return g;
}
// The 8 b3 and 8 b4 bases of a group column in the same 16-bit lanes (loaded once per lane).
struct GaacBases16 { uint32_t b3[4], b4[4]; };
GAACRT_HD GaacBases16 gaac_bases16(const GAACRT_DEVICE uint8_t* b3, const GAACRT_DEVICE uint8_t* b4) {
  GaacBases16 r;
  for (int32_t k = 0; k < 4; ++k) {
    r.b3[k] = (uint32_t)b3[2 * k] | ((uint32_t)b3[2 * k + 1] << 16);
    r.b4[k] = (uint32_t)b4[2 * k] | ((uint32_t)b4[2 * k + 1] << 16);
  }
  return r;
}
// Two 16-bit-lane words (elements 0,1 and 2,3) -> one byte-lane word.
GAACRT_HD uint32_t gaac_pack_bytes(uint32_t a, uint32_t b) {
  return (a & 0xFFu) | ((a >> 8) & 0xFF00u) | ((b & 0xFFu) << 16) | ((b << 8) & 0xFF000000u);
}

// Mode of a group: 3-bit when every e - b3 is in 0..7, else 4-bit when every e - b4 is in 0..15,
// else raw.
GAACRT_HD uint32_t gaac_group_tag(GaacGroupIn in, GaacBases16 b) {
  uint32_t miss3 = 0, miss4 = 0;
  for (int32_t k = 0; k < 4; ++k) {
    const uint32_t biased = in.e[k] | 0x01000100u;
    miss3 |= ((biased - b.b3[k]) & 0xFFF8FFF8u) ^ 0x01000100u;
    miss4 |= ((biased - b.b4[k]) & 0xFFF0FFF0u) ^ 0x01000100u;
  }
  return miss3 == 0 ? GAAC_TAG_3BIT : (miss4 == 0 ? GAAC_TAG_4BIT : GAAC_TAG_RAW);
}

// Full codes e - base(tag) of a group in byte lanes (channels 0..3, 4..7). No lane borrows: the
// tag was chosen so that every e >= its base.
GAACRT_HD GaacU32x2 gaac_group_full_codes(GaacGroupIn in, uint32_t tag, GaacBases16 b) {
  uint32_t c[4];
  for (int32_t k = 0; k < 4; ++k)
    c[k] = in.e[k] - (tag == GAAC_TAG_3BIT ? b.b3[k] : (tag == GAAC_TAG_4BIT ? b.b4[k] : 0u));
  GaacU32x2 r;
  r.lo = gaac_pack_bytes(c[0], c[1]);
  r.hi = gaac_pack_bytes(c[2], c[3]);
  return r;
}

// ORs the low 3 bits of a group's codes (byte lanes) into its set's words: the inverse of
// gaac_group_codes.
GAACRT_HD void gaac_put_group_codes(GAACRT_THREAD uint32_t* set, int32_t gamma, GaacU32x2 c) {
  const uint32_t lo = c.lo & 0x07070707u, hi = c.hi & 0x07070707u;
  if (gamma < 3) {
    set[gamma] |= lo | (hi << 3);
  } else {
    set[0] |= (lo & 0x03030303u) << 6;
    set[2] |= (hi & 0x03030303u) << 6;
    set[1] |= (((lo >> 2) & 0x01010101u) << 6) | (((hi >> 2) & 0x01010101u) << 7);
  }
}

// The X byte (bit 3 of each code; bit m = channel m) and the R record (bits 4..7) of a group:
// the inverses of gaac_spread_x / gaac_spread_r. The multiply gathers bit 0 of the four byte
// lanes into bits 21..24 (its shifted copies land on distinct bits, so no carries).
GAACRT_HD uint32_t gaac_gather_bit3(uint32_t w) { return ((((w >> 3) & 0x01010101u) * 0x00204081u) >> 21) & 15u; }
GAACRT_HD uint32_t gaac_group_x(GaacU32x2 c) { return gaac_gather_bit3(c.lo) | (gaac_gather_bit3(c.hi) << 4); }
GAACRT_HD uint32_t gaac_group_r(GaacU32x2 c) { return ((c.lo >> 4) & 0x0F0F0F0Fu) | (((c.hi >> 4) & 0x0F0F0F0Fu) << 4); }

// ---- whole-tile reference routines (one thread; kernels use the word functions above) -----------
// Counts of each tag in a tag stream of gaac_lanes(d) uint16 (shared with the FP8 tiles).
GAACRT_HD GaacModeCounts gaac_tag_counts(const GAACRT_DEVICE uint8_t* tags, int32_t d) {
  GaacModeCounts c = {0, 0, 0, 0};
  for (int32_t l = 0; l < gaac_lanes(d); ++l) {
    const GaacTagMasks m = gaac_tag_masks(gaac_tag_word(tags, l));
    const uint32_t nx = gaac_popc(m.x), nraw = gaac_popc(m.raw), nbad = gaac_popc(m.bad);
    c.nraw += nraw;
    c.nbad += nbad;
    c.n4 += nx - nraw - nbad;
    c.n3 += GAAC_LANE_GROUPS - nx;
  }
  return c;
}

// Checks a tile whose tag stream ends its fixed part (every GAAC tile, BF16 or FP8): `avail` =
// bytes readable at `slot`, `capacity` = the slot's escape capacity, `r_bytes` = R-record bytes per
// raw group, `expected_escape` = the count recorded at encode time or -1. Reads nothing past
// min(avail, fixed + capacity): the tags are read only once the fixed part is known to be there.
GAACRT_HD GaacCheck gaac_validate_tags(const GAACRT_DEVICE uint8_t* slot, uint32_t avail, int32_t d, uint32_t fixed,
                                       uint32_t r_bytes, uint32_t capacity, int32_t expected_escape) {
  GaacCheck r = {GAAC_OK, 0};
  if (!gaac_tile_dim_ok(d)) { r.status = GAAC_STATUS_BAD_TILE_DIM; r.detail = d; return r; }
  if (avail < fixed) { r.status = GAAC_STATUS_TRUNCATED; r.detail = (int32_t)fixed; return r; }
  const GAACRT_DEVICE uint8_t* tags = slot + fixed - (uint32_t)d / 2u;
  uint32_t need = 0;
  for (int32_t l = 0; l < gaac_lanes(d); ++l) {
    const GaacTagMasks m = gaac_tag_masks(gaac_tag_word(tags, l));
    if (m.bad) {
      int32_t j = 0;
      while (!((m.bad >> (2 * j)) & 1u)) ++j;
      r.status = GAAC_STATUS_BAD_TAG;
      r.detail = 8 * l + j;
      return r;
    }
    need += gaac_popc(m.x) + r_bytes * gaac_popc(m.raw);
  }
  if (need > capacity) { r.status = GAAC_STATUS_ESCAPE_OVERRUN; r.detail = (int32_t)need; return r; }
  if (avail - fixed < need) { r.status = GAAC_STATUS_TRUNCATED; r.detail = (int32_t)(fixed + need); return r; }
  if (expected_escape >= 0 && (uint32_t)expected_escape != need) {
    r.status = GAAC_STATUS_ESCAPE_MISMATCH;
    r.detail = (int32_t)need;
  }
  return r;
}

// Counts of each tag over a BF16 tile (reads only the tag stream).
GAACRT_HD GaacModeCounts gaac_tile_modes(const GAACRT_DEVICE uint8_t* slot, int32_t d) {
  return gaac_tag_counts(slot + gaac_tags_offset(d), d);
}

// Escape bytes a tile's tags call for (tag 3 counted as raw-sized, so an overrun check on a
// corrupt tile stays conservative).
GAACRT_HD uint32_t gaac_tile_escape_bytes(const GAACRT_DEVICE uint8_t* slot, int32_t d) {
  const GaacModeCounts c = gaac_tile_modes(slot, d);
  return (c.n4 + c.nraw + c.nbad) + 4u * (c.nraw + c.nbad);
}

// Checks a BF16 slot before anything trusts it (see gaac_validate_tags).
GAACRT_HD GaacCheck gaac_validate(const GAACRT_DEVICE uint8_t* slot, uint32_t avail, int32_t d,
                                  uint32_t capacity, int32_t expected_escape) {
  return gaac_validate_tags(slot, avail, d, gaac_tile_dim_ok(d) ? gaac_fixed_bytes(d) : 0u, 4u, capacity,
                            expected_escape);
}

// The encoder, lane by lane (lane l: column group l % G of tokens 2 (l / G) + {0, 1} + 4i; the
// layout above). gaac_encode_tile runs the lanes in turn, the CUDA kernel one lane per thread of a
// warp (backends/cuda/kv_store.cu), so both write the same bytes.
// Pass 1 of lane l: its 8 tags (2 bits each), and the X bytes (n_x) and R records (n_raw) it needs.
GAACRT_HD uint32_t gaac_encode_lane_tags(const GAACRT_DEVICE uint16_t* raw, int32_t stride, int32_t d, int32_t l,
                                         const GAACRT_DEVICE uint8_t* b3, const GAACRT_DEVICE uint8_t* b4,
                                         GAACRT_THREAD uint32_t* n_x, GAACRT_THREAD uint32_t* n_raw) {
  const int32_t G = gaac_group_cols(d), h = l >= G ? 1 : 0, g = l - h * G;
  const GaacBases16 bw = gaac_bases16(b3 + 8 * g, b4 + 8 * g);
  uint32_t tags = 0;
  for (int32_t j = 0; j < GAAC_LANE_GROUPS; ++j) {
    const int32_t t = 4 * (j >> 1) + 2 * h + (j & 1);
    const uint32_t tag = gaac_group_tag(gaac_group_load(raw + t * stride + 8 * g), bw);
    tags |= tag << (2 * j);
    *n_x += tag != GAAC_TAG_3BIT;
    *n_raw += tag == GAAC_TAG_RAW;
  }
  return tags;
}

// Pass 2 of lane l: its sign/mantissa bytes, code words and tags, its X bytes at escape offset xo
// and its R records at ro (the lanes before it take the escapes before).
GAACRT_HD void gaac_encode_lane_write(const GAACRT_DEVICE uint16_t* raw, int32_t stride, int32_t d, int32_t l,
                                      uint32_t tags, const GAACRT_DEVICE uint8_t* b3, const GAACRT_DEVICE uint8_t* b4,
                                      GAACRT_DEVICE uint8_t* slot, uint32_t xo, uint32_t ro) {
  const int32_t nl = gaac_lanes(d), G = gaac_group_cols(d), h = l >= G ? 1 : 0, g = l - h * G;
  const GaacBases16 bw = gaac_bases16(b3 + 8 * g, b4 + 8 * g);
  GAACRT_DEVICE uint8_t* esc = slot + gaac_fixed_bytes(d);
  uint32_t w[6] = {0, 0, 0, 0, 0, 0};
  for (int32_t j = 0; j < GAAC_LANE_GROUPS; ++j) {
    const int32_t t = 4 * (j >> 1) + 2 * h + (j & 1);
    const GaacGroupIn in = gaac_group_load(raw + t * stride + 8 * g);
    const uint32_t tag = (tags >> (2 * j)) & 3u;
    const GaacU32x2 c = gaac_group_full_codes(in, tag, bw);
    GAACRT_DEVICE uint8_t* sm = slot + 16u * (uint32_t)((j >> 1) * nl + l) + 8u * (uint32_t)(j & 1);
    gaac_st32(sm, gaac_pack_bytes(in.sm[0], in.sm[1]));
    gaac_st32(sm + 4, gaac_pack_bytes(in.sm[2], in.sm[3]));
    gaac_put_group_codes(w + 3 * (j >> 2), j & 3, c);
    if (tag != GAAC_TAG_3BIT) esc[xo++] = (uint8_t)gaac_group_x(c);
    if (tag == GAAC_TAG_RAW) { gaac_st32(esc + ro, gaac_group_r(c)); ro += 4; }
  }
  for (int32_t k = 0; k < 6; ++k) gaac_st32(slot + gaac_code_word_offset(d, l, k), w[k]);
  slot[gaac_tags_offset(d) + 2 * l] = (uint8_t)tags;
  slot[gaac_tags_offset(d) + 2 * l + 1] = (uint8_t)(tags >> 8);
}

// Encodes raw BF16 [16][d] (row stride `stride` elements) with bases b3[d], b4[d] into `slot`
// (fixed + capacity bytes). Returns the escape bytes used, GAAC_DOES_NOT_FIT (nothing written)
// or GAAC_BAD_TILE_DIM. Escape bytes past the used count are left untouched.
GAACRT_HD int32_t gaac_encode_tile(const GAACRT_DEVICE uint16_t* raw, int32_t stride, int32_t d,
                                   const GAACRT_DEVICE uint8_t* b3, const GAACRT_DEVICE uint8_t* b4,
                                   uint32_t capacity, GAACRT_DEVICE uint8_t* slot) {
  if (!gaac_tile_dim_ok(d)) return GAAC_BAD_TILE_DIM;
  const int32_t nl = gaac_lanes(d);
  uint32_t tags[GAAC_MAX_LANES];
  uint32_t n_x = 0, n_raw = 0;
  // Pass 1: modes only, so that a tile that does not fit leaves the slot untouched.
  for (int32_t l = 0; l < nl; ++l) tags[l] = gaac_encode_lane_tags(raw, stride, d, l, b3, b4, &n_x, &n_raw);
  const uint32_t n_esc = n_x + 4u * n_raw;
  if (n_esc > capacity) return GAAC_DOES_NOT_FIT;
  // Pass 2: sm bytes, code words, tags and escapes: X bytes in lane order, then the R records.
  uint32_t xo = 0, ro = n_x;
  for (int32_t l = 0; l < nl; ++l) {
    gaac_encode_lane_write(raw, stride, d, l, tags[l], b3, b4, slot, xo, ro);
    const GaacTagMasks m = gaac_tag_masks(tags[l]);
    xo += gaac_popc(m.x);
    ro += 4u * gaac_popc(m.raw);
  }
  return (int32_t)n_esc;
}

// Decodes the groups of lane l whose token passes `want` (bit t set) into out[t * stride + c].
// xo / ro: the lane's first X byte and R record, relative to the escape area. Tags must have been
// validated (no tag 3) and the escapes checked against the capacity by the caller.
GAACRT_HD void gaac_decode_lane(const GAACRT_DEVICE uint8_t* slot, int32_t d, int32_t l, uint32_t xo, uint32_t ro,
                                const GAACRT_DEVICE uint8_t* b3, const GAACRT_DEVICE uint8_t* b4, uint32_t want,
                                GAACRT_DEVICE uint16_t* out, int32_t stride) {
  const int32_t G = gaac_group_cols(d), nl = gaac_lanes(d);
  const int32_t h = l >= G ? 1 : 0, g = l - h * G;
  const GAACRT_DEVICE uint8_t* esc = slot + gaac_fixed_bytes(d);
  const GaacU32x2 w3 = {gaac_ld32(b3 + 8 * g), gaac_ld32(b3 + 8 * g + 4)};
  const GaacU32x2 w4 = {gaac_ld32(b4 + 8 * g), gaac_ld32(b4 + 8 * g + 4)};
  uint32_t w[6];
  for (int32_t k = 0; k < 6; ++k) w[k] = gaac_ld32(slot + gaac_code_word_offset(d, l, k));
  const uint32_t tags = gaac_lane_tags(slot, d, l);
  for (int32_t j = 0; j < GAAC_LANE_GROUPS; ++j) {
    const uint32_t tag = (tags >> (2 * j)) & 3u;
    const int32_t t = 4 * (j >> 1) + 2 * h + (j & 1);
    uint32_t x = 0, r4 = 0;
    if (tag != GAAC_TAG_3BIT) x = esc[xo++];
    if (tag == GAAC_TAG_RAW) { r4 = gaac_ld32(esc + ro); ro += 4; }
    if (!((want >> t) & 1u)) continue;
    const int32_t s = 3 * (j >> 2);
    const GaacU32x2 low3 = gaac_group_codes(w[s], w[s + 1], w[s + 2], j & 3);
    const GaacU32x2 ex = gaac_group_exponents(tag, w3, w4, low3, x, r4);
    const GAACRT_DEVICE uint8_t* sm = slot + 16u * (uint32_t)((j >> 1) * nl + l) + 8u * (uint32_t)(j & 1);
    const GaacU32x2 p = gaac_bf16x4(gaac_ld32(sm), ex.lo), q = gaac_bf16x4(gaac_ld32(sm + 4), ex.hi);
    GAACRT_DEVICE uint16_t* o = out + t * stride + 8 * g;
    o[0] = (uint16_t)p.lo; o[1] = (uint16_t)(p.lo >> 16); o[2] = (uint16_t)p.hi; o[3] = (uint16_t)(p.hi >> 16);
    o[4] = (uint16_t)q.lo; o[5] = (uint16_t)(q.lo >> 16); o[6] = (uint16_t)q.hi; o[7] = (uint16_t)(q.hi >> 16);
  }
}

// Decodes token rows selected by `want` (bit t = token t; 0xFFFF = the whole tile) into
// out[t * stride + c]. Checks the tags first (tag 3 -> BAD_TAG, escapes > capacity ->
// ESCAPE_OVERRUN) and then reads only the fixed part and the escapes the tags call for, so the
// slot needs fixed + capacity readable bytes and nothing past them is ever touched.
GAACRT_HD GaacCheck gaac_decode_rows(const GAACRT_DEVICE uint8_t* slot, int32_t d, uint32_t capacity,
                                     const GAACRT_DEVICE uint8_t* b3, const GAACRT_DEVICE uint8_t* b4,
                                     uint32_t want, GAACRT_DEVICE uint16_t* out, int32_t stride) {
  const GaacCheck c = gaac_validate(slot, gaac_fixed_bytes(d) + capacity, d, capacity, -1);
  if (c.status != GAAC_OK) return c;
  uint32_t n_x = 0;
  for (int32_t l = 0; l < gaac_lanes(d); ++l) n_x += gaac_popc(gaac_tag_masks(gaac_lane_tags(slot, d, l)).x);
  uint32_t xo = 0, ro = n_x;
  for (int32_t l = 0; l < gaac_lanes(d); ++l) {
    const GaacTagMasks m = gaac_tag_masks(gaac_lane_tags(slot, d, l));
    const int32_t h = l >= gaac_group_cols(d) ? 1 : 0;
    const uint32_t lane_tokens = h ? 0xCCCCu : 0x3333u;  // tokens 2,3,6,7,.. or 0,1,4,5,..
    if (want & lane_tokens) gaac_decode_lane(slot, d, l, xo, ro, b3, b4, want, out, stride);
    xo += gaac_popc(m.x);
    ro += 4u * gaac_popc(m.raw);
  }
  return c;
}

GAACRT_HD GaacCheck gaac_decode_tile(const GAACRT_DEVICE uint8_t* slot, int32_t d, uint32_t capacity,
                                     const GAACRT_DEVICE uint8_t* b3, const GAACRT_DEVICE uint8_t* b4,
                                     GAACRT_DEVICE uint16_t* out, int32_t stride) {
  return gaac_decode_rows(slot, d, capacity, b3, b4, 0xFFFFu, out, stride);
}

// One token row t (what an attention kernel needs for q·k or p·v of one key): out[0..d).
// (Row stride 0: the one selected row lands at out itself.)
GAACRT_HD GaacCheck gaac_decode_row(const GAACRT_DEVICE uint8_t* slot, int32_t d, uint32_t capacity,
                                    const GAACRT_DEVICE uint8_t* b3, const GAACRT_DEVICE uint8_t* b4,
                                    int32_t t, GAACRT_DEVICE uint16_t* out) {
  return gaac_decode_rows(slot, d, capacity, b3, b4, 1u << (t & 15), out, 0);
}

}  // namespace gaacrt
