// e8_codebook.h — the E8P12 key codebook: prototypes, the packed 1 KiB table, the 16-bit code
// layout, decode of one 8-dim block, and the quad storage of a key's codes (portable: C++, CUDA
// and MSL include this file).
//
// Follows shared/spec/e8.md §1 (construction), §2 (code layout, QuIP# packed / "v1", quads) and
// §3 (decode). Method: seeds/001 §3.2; the codebook is QuIP#'s E8P12.
//
// ---- Codebook (§1) ----------------------------------------------------------------------------
// 256 prototypes a ("absolute values"): rows 0..226 are every vector of {1/2, 3/2, 5/2}^8 with
// |a|^2 <= 10 in ascending lexicographic order; rows 227..255 are 29 fixed norm-12 pads (five 3/2
// and three 1/2). sigma(a) = sum of a is an integer; a' = a with coordinate 7 negated when sigma is
// odd, so that a' lies in D8^ = D8 + 1/2. The 65,536 codewords are the 128 even sign flips of each
// a', shifted by +1/4 or -1/4. Every coordinate is an odd multiple of 1/4 in [-11/4, 11/4], so
// 4g is an odd int8 and g is exact in fp16 and bf16.
//
// ---- Code (§2) --------------------------------------------------------------------------------
//   bit 15            8 7             0
//      |  a (prototype) |  s (sign byte) |
//   pi = popcount(s) & 1          shift = pi ? -1/4 : +1/4
//   e  = s ^ pi                   (even weight: the flips of a', bit 0 toggled when pi = 1)
//   bit b of e negates dimension BIT2DIM[b] = {0, 2, 4, 6, 1, 3, 5, 7}[b]
//   g_i = (-1)^[bit DIM2BIT[i] of e] * a'_i + shift
//
// ---- Packed table (§3) ------------------------------------------------------------------------
// GAACRT_E8_PACKED_WORDS: word a holds in nibble k the value 2*a'[BIT2DIM[k]] + 8 (3..13), so the
// low half-word holds dims 0,2,4,6 and the high one dims 1,3,5,7. Spreading the 8 bits of e to
// bits 4k and multiplying by 14 (0b1110) gives an XOR mask that turns each odd nibble n into
// 16 - n, which is exact negation in this offset-8 code. After that, nibble k is n_k and
//   g[BIT2DIM[k]] = (n_k - 8) / 2 + shift,     4 * g = 2*n_k - 16 + (pi ? -1 : +1).
//
// ---- Quads: how a key's codes are stored (§2 storage suggestion, QuIP#'s packing) ------------
// The M = d/8 blocks of a key are grouped in quads of 4 (blocks 4q .. 4q+3). Per quad, two
// little-endian uint32 words:
//   proto word: byte i = prototype a of block 4q+i
//   sign word:  bit 4j + i = bit j of the sign byte s of block 4q+i
// so (sign_word >> i) & 0x11111111 is block i's sign byte already spread to bits 4j: the GPU's
// sign spreading is one shift and one AND. 8 bytes per 4 blocks: 32 B per 128-dim key.
#pragma once
#include "../../common/portable.h"

namespace gaacrt {

constexpr int32_t E8_BLOCK = 8;               // dimensions per codeword
constexpr int32_t E8_N_PROTO = 256;
constexpr int32_t E8_N_PROTO_BALL = 227;      // rows 0..226: the norm <= 10 ball
constexpr int32_t E8_N_PADS = 29;             // rows 227..255: norm-12 pads
constexpr int32_t E8_N_CODES = 65536;
constexpr int32_t E8_QUAD = 4;                // blocks per stored quad

// fp16x2 constants of the GPU decode (§3 steps 3-4): OR 32.25 into both lanes, then add -36.0
// (shift +1/4) or -36.5 (shift -1/4) in one add.f16x2; every step is exact.
constexpr uint32_t E8_HALF2_BIAS_PLUS = 0xD080D080u;
constexpr uint32_t E8_HALF2_BIAS_MINUS = 0xD090D090u;
constexpr uint32_t E8_HALF2_OR = 0x50085008u;
constexpr uint32_t E8_HALF2_KEEP = 0x00F000F0u;

// The 1 KiB packed table (256 little-endian words), generated from the §1 construction; its
// sha256[:16] is efc2c03c60acd955 (e8_testvectors.txt), checked by tests/test_e8_codebook.py.
#define GAACRT_E8_PACKED_WORDS  \
    0x99999999u, 0x59999999u, 0xd9999999u, 0x7999b999u, 0xb999b999u, 0x3999b999u, 0x9999d999u, 0x5999d999u,  \
    0x7b999999u, 0xbb999999u, 0x3b999999u, 0x9b99b999u, 0x5b99b999u, 0x7b99d999u, 0x9d999999u, 0x5d999999u,  \
    0x7d99b999u, 0x79999b99u, 0xb9999b99u, 0x39999b99u, 0x9999bb99u, 0x5999bb99u, 0x7999db99u, 0x9b999b99u,  \
    0x5b999b99u, 0x7b99bb99u, 0xbb99bb99u, 0x7d999b99u, 0x99999d99u, 0x59999d99u, 0x7999bd99u, 0x7b999d99u,  \
    0x79b99999u, 0xb9b99999u, 0x39b99999u, 0x99b9b999u, 0x59b9b999u, 0x79b9d999u, 0x9bb99999u, 0x5bb99999u,  \
    0x7bb9b999u, 0xbbb9b999u, 0x7db99999u, 0x99b99b99u, 0x59b99b99u, 0x79b9bb99u, 0xb9b9bb99u, 0x7bb99b99u,  \
    0xbbb99b99u, 0x9bb9bb99u, 0x79b99d99u, 0x99d99999u, 0x59d99999u, 0x79d9b999u, 0x7bd99999u, 0x79d99b99u,  \
    0x799999b9u, 0xb99999b9u, 0x399999b9u, 0x9999b9b9u, 0x5999b9b9u, 0x7999d9b9u, 0x9b9999b9u, 0x5b9999b9u,  \
    0x7b99b9b9u, 0xbb99b9b9u, 0x7d9999b9u, 0x99999bb9u, 0x59999bb9u, 0x7999bbb9u, 0xb999bbb9u, 0x7b999bb9u,  \
    0xbb999bb9u, 0x9b99bbb9u, 0x79999db9u, 0x99b999b9u, 0x59b999b9u, 0x79b9b9b9u, 0xb9b9b9b9u, 0x7bb999b9u,  \
    0xbbb999b9u, 0x9bb9b9b9u, 0x79b99bb9u, 0xb9b99bb9u, 0x99b9bbb9u, 0x9bb99bb9u, 0x79d999b9u, 0x999999d9u,  \
    0x599999d9u, 0x7999b9d9u, 0x7b9999d9u, 0x79999bd9u, 0x79b999d9u, 0x799b9999u, 0xb99b9999u, 0x399b9999u,  \
    0x999bb999u, 0x599bb999u, 0x799bd999u, 0x9b9b9999u, 0x5b9b9999u, 0x7b9bb999u, 0xbb9bb999u, 0x7d9b9999u,  \
    0x999b9b99u, 0x599b9b99u, 0x799bbb99u, 0xb99bbb99u, 0x7b9b9b99u, 0xbb9b9b99u, 0x9b9bbb99u, 0x799b9d99u,  \
    0x99bb9999u, 0x59bb9999u, 0x79bbb999u, 0xb9bbb999u, 0x7bbb9999u, 0xbbbb9999u, 0x9bbbb999u, 0x79bb9b99u,  \
    0xb9bb9b99u, 0x99bbbb99u, 0x9bbb9b99u, 0x79db9999u, 0x999b99b9u, 0x599b99b9u, 0x799bb9b9u, 0xb99bb9b9u,  \
    0x7b9b99b9u, 0xbb9b99b9u, 0x9b9bb9b9u, 0x799b9bb9u, 0xb99b9bb9u, 0x999bbbb9u, 0x9b9b9bb9u, 0x79bb99b9u,  \
    0xb9bb99b9u, 0x99bbb9b9u, 0x9bbb99b9u, 0x99bb9bb9u, 0x799b99d9u, 0x999d9999u, 0x599d9999u, 0x799db999u,  \
    0x7b9d9999u, 0x799d9b99u, 0x79bd9999u, 0x799d99b9u, 0x7999999bu, 0xb999999bu, 0x3999999bu, 0x9999b99bu,  \
    0x5999b99bu, 0x7999d99bu, 0x9b99999bu, 0x5b99999bu, 0x7b99b99bu, 0xbb99b99bu, 0x7d99999bu, 0x99999b9bu,  \
    0x59999b9bu, 0x7999bb9bu, 0xb999bb9bu, 0x7b999b9bu, 0xbb999b9bu, 0x9b99bb9bu, 0x79999d9bu, 0x99b9999bu,  \
    0x59b9999bu, 0x79b9b99bu, 0xb9b9b99bu, 0x7bb9999bu, 0xbbb9999bu, 0x9bb9b99bu, 0x79b99b9bu, 0xb9b99b9bu,  \
    0x99b9bb9bu, 0x9bb99b9bu, 0x79d9999bu, 0x999999bbu, 0x599999bbu, 0x7999b9bbu, 0xb999b9bbu, 0x7b9999bbu,  \
    0xbb9999bbu, 0x9b99b9bbu, 0x79999bbbu, 0xb9999bbbu, 0x9999bbbbu, 0x9b999bbbu, 0x79b999bbu, 0xb9b999bbu,  \
    0x99b9b9bbu, 0x9bb999bbu, 0x99b99bbbu, 0x799999dbu, 0x999b999bu, 0x599b999bu, 0x799bb99bu, 0xb99bb99bu,  \
    0x7b9b999bu, 0xbb9b999bu, 0x9b9bb99bu, 0x799b9b9bu, 0xb99b9b9bu, 0x999bbb9bu, 0x9b9b9b9bu, 0x79bb999bu,  \
    0xb9bb999bu, 0x99bbb99bu, 0x9bbb999bu, 0x99bb9b9bu, 0x799b99bbu, 0xb99b99bbu, 0x999bb9bbu, 0x9b9b99bbu,  \
    0x999b9bbbu, 0x99bb99bbu, 0x799d999bu, 0x9999999du, 0x5999999du, 0x7999b99du, 0x7b99999du, 0x79999b9du,  \
    0x79b9999du, 0x799999bdu, 0x799b999du, 0x5b99bb9bu, 0x5b9bbb99u, 0x5b99bbb9u, 0x5bb9bb99u, 0x7b9b9bbbu,  \
    0x799bbbbbu, 0x7b9bb9bbu, 0x599b9bbbu, 0x5b9b99bbu, 0x599bb9bbu, 0x7bbb9b9bu, 0x79bbbb9bu, 0x7bbbb99bu,  \
    0x59bb9b9bu, 0x5bbb999bu, 0x59bbb99bu, 0x7bb99bbbu, 0x79b9bbbbu, 0x7bb9b9bbu, 0x59b99bbbu, 0x5bb999bbu,  \
    0x59bbb9b9u, 0x7bbb9bb9u, 0x79bbbbb9u, 0x7bbbb9b9u, 0x59bb9bb9u, 0x5bbb99b9u, 0x5bb9b9b9u, 0x7b9bbb9bu

#if defined(__METAL_VERSION__)
constant uint32_t e8_packed_table[E8_N_PROTO] = {GAACRT_E8_PACKED_WORDS};
#else
// Host copy. CUDA kernels stage GAACRT_E8_PACKED_WORDS into __constant__ or shared memory.
inline constexpr uint32_t e8_packed_table[E8_N_PROTO] = {GAACRT_E8_PACKED_WORDS};
#endif

// Bit b of the effective sign byte negates dimension e8_bit2dim(b); e8_dim2bit is the inverse.
GAACRT_HD int32_t e8_bit2dim(int32_t b) { return b < 4 ? 2 * b : 2 * (b - 4) + 1; }
GAACRT_HD int32_t e8_dim2bit(int32_t i) { return (i & 1) ? 4 + (i >> 1) : (i >> 1); }
// Nibble holding dimension i in a packed word: the same permutation.
GAACRT_HD int32_t e8_dim_nibble(int32_t i) { return e8_dim2bit(i); }

struct E8Vec8 { float v[E8_BLOCK]; };      // one 8-dim block, natural dimension order
struct E8Int8x8 { int8_t v[E8_BLOCK]; };   // 4 * g, natural order

GAACRT_HD uint32_t e8_parity32(uint32_t x) {
  x ^= x >> 16; x ^= x >> 8; x ^= x >> 4; x ^= x >> 2; x ^= x >> 1;
  return x & 1u;
}
GAACRT_HD uint32_t e8_code_proto(uint32_t code) { return (code >> 8) & 0xFFu; }
GAACRT_HD uint32_t e8_code_signs(uint32_t code) { return code & 0xFFu; }
// pi: 1 when the shift is -1/4.
GAACRT_HD uint32_t e8_code_parity(uint32_t code) { return e8_parity32(code & 0xFFu); }

// Bit k of b (k = 0..7) moved to bit 4k.
GAACRT_HD uint32_t e8_spread_bits(uint32_t b) {
  uint32_t x = b & 0xFFu;
  x = (x | (x << 12)) & 0x000F000Fu;   // bits 0-3 stay, 4-7 go to 16-19
  x = (x | (x << 6)) & 0x03030303u;    // pairs to byte lanes
  x = (x | (x << 3)) & 0x11111111u;    // singles to nibble lanes
  return x;
}

// Inverse of e8_spread_bits: bit 4k moved to bit k.
GAACRT_HD uint32_t e8_gather_bits(uint32_t x) {
  x &= 0x11111111u;
  x = (x | (x >> 3)) & 0x03030303u;
  x = (x | (x >> 6)) & 0x000F000Fu;
  x = (x | (x >> 12)) & 0xFFu;
  return x;
}

// The packed word of prototype a with the sign flips of e applied: nibble k = n_k (3..13).
// spread_e = e8_spread_bits(e), or straight from a quad's sign word (e8_quad_spread_signs).
GAACRT_HD uint32_t e8_signed_word(uint32_t word, uint32_t spread_e) { return word ^ (spread_e * 14u); }

// Spread effective flips of a code (e = s ^ pi).
GAACRT_HD uint32_t e8_code_spread_flips(uint32_t code) {
  return e8_spread_bits((code & 0xFFu) ^ e8_code_parity(code));
}

// Reference decode, x4 integers: 4 * g_i = 2 * n - 16 + (pi ? -1 : +1), natural order.
GAACRT_HD E8Int8x8 e8_decode_x4_word(uint32_t word, uint32_t code) {
  const uint32_t sw = e8_signed_word(word, e8_code_spread_flips(code));
  const int32_t sh = e8_code_parity(code) ? -1 : 1;
  E8Int8x8 r;
  for (int32_t i = 0; i < E8_BLOCK; ++i) r.v[i] = (int8_t)(2 * (int32_t)((sw >> (4 * e8_dim_nibble(i))) & 15u) - 16 + sh);
  return r;
}

// Reference decode to float (exact: every value is a multiple of 1/4).
GAACRT_HD E8Vec8 e8_decode_word(uint32_t word, uint32_t code) {
  const E8Int8x8 q = e8_decode_x4_word(word, code);
  E8Vec8 r;
  for (int32_t i = 0; i < E8_BLOCK; ++i) r.v[i] = 0.25f * (float)q.v[i];
  return r;
}

// GPU form (§3 step 3): the half2 bit pattern of dims (2i, 2i+1), i = 0..3, before the bias add.
// Low half = 32.25 + n/2 of dim 2i (nibble i), high half = that of dim 2i+1 (nibble i+4).
// Adding E8_HALF2_BIAS_PLUS / _MINUS (one add.f16x2, exact) gives half2(g_2i, g_2i+1).
GAACRT_HD uint32_t e8_half2_bits(uint32_t signed_word, int32_t i) {
  const uint32_t w = i == 0 ? (signed_word << 4) : (signed_word >> (4 * i - 4));
  return (w & E8_HALF2_KEEP) | E8_HALF2_OR;
}
GAACRT_HD uint32_t e8_half2_bias(uint32_t parity) { return parity ? E8_HALF2_BIAS_MINUS : E8_HALF2_BIAS_PLUS; }

// ---- prototypes derived from the table --------------------------------------------------------
// a'_i (signed base point) and |a_i|, x2 as integers, from a packed word.
GAACRT_HD int32_t e8_word_base_x2(uint32_t word, int32_t i) { return (int32_t)((word >> (4 * e8_dim_nibble(i))) & 15u) - 8; }
GAACRT_HD int32_t e8_word_abs_x2(uint32_t word, int32_t i) {
  const int32_t b = e8_word_base_x2(word, i);
  return b < 0 ? -b : b;
}

// ---- quads -------------------------------------------------------------------------------------
struct E8Quad { uint32_t proto; uint32_t signs; };

GAACRT_HD E8Quad e8_quad_pack(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3) {
  E8Quad q;
  q.proto = e8_code_proto(c0) | (e8_code_proto(c1) << 8) | (e8_code_proto(c2) << 16) | (e8_code_proto(c3) << 24);
  q.signs = e8_spread_bits(c0) | (e8_spread_bits(c1) << 1) | (e8_spread_bits(c2) << 2) | (e8_spread_bits(c3) << 3);
  return q;
}
// Block i's sign byte, spread to bits 4j (the raw s, before the parity fix).
GAACRT_HD uint32_t e8_quad_spread_signs(uint32_t signs, int32_t i) { return (signs >> i) & 0x11111111u; }
// Block i's prototype index.
GAACRT_HD uint32_t e8_quad_proto(uint32_t proto, int32_t i) { return (proto >> (8 * i)) & 0xFFu; }
// Block i's 16-bit code.
GAACRT_HD uint32_t e8_quad_code(E8Quad q, int32_t i) {
  return (e8_quad_proto(q.proto, i) << 8) | e8_gather_bits(e8_quad_spread_signs(q.signs, i));
}
// Block i's effective flips already spread, ready for e8_signed_word: the parity of the spread
// sign byte is the parity of the word, and fixing it toggles bit 0.
GAACRT_HD uint32_t e8_quad_spread_flips(uint32_t signs, int32_t i, GAACRT_THREAD uint32_t* parity) {
  const uint32_t sp = e8_quad_spread_signs(signs, i);
  *parity = e8_parity32(sp);
  return sp ^ *parity;
}

// ---- the int8 form of a quad (the CUDA attention kernel's keys, attention_e8_mma.cuh) ----------
// With n the nibbles of the flipped table word (n_i = 8 + 2 eps_i a'_i, odd, in [3, 13]) and pi
// the block's shift bit, 4 g_i = 2 n_i - 16 + (pi ? -1 : 1) = 2 (n_i - pi) - 15: the bytes
// b = n - pi (in [2, 13]) are g in an integer form an int8 dot product takes directly.
// The four shift bits of a quad at once: bit i is the parity of block i's sign bits (bits i,
// i + 4, ..., i + 28 of the interleaved word).
GAACRT_HD uint32_t e8_quad_parities(uint32_t signs) {
  uint32_t p = signs ^ (signs >> 16);
  p ^= p >> 8;
  p ^= p >> 4;
  return p & 15u;
}
// Block i as bytes b, eight of them: lo holds dims (0, 4, 1, 5), hi dims (2, 6, 3, 7) (the even and
// odd nibbles; §2's bit-to-dimension map). eff = signs ^ parities: the effective flips e = s ^ pi
// of every block (fixing the parity toggles each block's bit 0, bit i of the word). Subtracting pi
// from every nibble borrows nowhere (n >= 3).
struct E8BytePair { uint32_t lo, hi; };
GAACRT_HD E8BytePair e8_quad_block_bytes(uint32_t table_word, uint32_t eff, uint32_t parities, int32_t i) {
  const uint32_t n = (table_word ^ (((eff >> i) & 0x11111111u) * 14u)) - ((parities >> i) & 1u) * 0x11111111u;
  E8BytePair r;
  r.lo = n & 0x0F0F0F0Fu;
  r.hi = (n >> 4) & 0x0F0F0F0Fu;
  return r;
}
// Dim of byte k (0..7: lo's bytes, then hi's) of e8_quad_block_bytes.
GAACRT_HD int32_t e8_byte_dim(int32_t k) { return (k & 3) / 2 + 4 * ((k & 3) % 2) + 2 * (k >> 2); }

}  // namespace gaacrt
