// matvec_pieces.cuh — how the int8 decode matvec (matvec_q8.cu) reads a quantized weight row.
//
// The row is cut into pieces: Piece<B>::kLanes consecutive lanes share one block, each taking a
// contiguous run of its quant bytes (8 or 16), so a warp-wide load of those reads one contiguous
// span of the row (the block headers — scales, high bits — are loads the block's lanes share;
// Q6_K reads three such runs). (Reading a whole 18-byte Q4_0 block per lane cost 17 byte-wide loads per lane, each
// spanning 576 bytes: the L1, not DRAM, was the limit, 0.65 TB/s on the H200.)
//
// A piece is read in two steps, so the kernel can have the next pieces' loads in flight while it
// computes on the current ones: piece_load() fetches the raw bytes into registers (Raw; a GGUF
// piece's load(), a regrouped one's load_at()), unpack() turns them into G groups of W int8x4
// words. A group's words lie in one 32-value block of x (the unit
// of x's int8 scale) at columns col[g] + off(i) of the weight block, and share one weight scale
// d, so the group's contribution per token is
//     xd · (d · Σ_i dp4a(w[g][i], xq)) + m · xs          (xs = xd · Σ xq over that 32-block)
// m is the block minimum term (Q4_1, Q5_1, K-quants' -dmin·mn); only the group's first lane
// carries it (kMin says whether a type has one), so it is added once per 32 values. Offsets
// (Q4_0's -8, Q5_0's -16, Q6_K's -32) are applied per byte when unpacking: (q + 128 - off) ^ 0x80 is q - off
// as a signed byte, with no carry between bytes because q + 128 - off < 256.
#pragma once
#include <cstdint>
#include <type_traits>

#include "../block_traits.cuh"
#include "common/half.h"
#include "quant/blocks.h"
#include "quant/group8.h"

namespace gaacrt::cuda {

template <int G, int W>
struct PieceVals {
  uint32_t w[G][W];  // int8x4 weights
  int col[G];        // column of the group's first word within the block
  float d[G], m[G];
};

namespace pieces {

constexpr uint32_t kLow4 = 0x0F0F0F0Fu;

__device__ __forceinline__ uint32_t ld16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
// 32 bits from a 2-byte-aligned address (blocks of 18, 22, 34 and 210 bytes).
__device__ __forceinline__ uint32_t ld32_a2(const uint8_t* p) { return ld16(p) | (ld16(p + 2) << 16); }
// 32 bits from a 4-byte-aligned address (blocks whose size is a multiple of 4; the launchers
// check the data pointer).
__device__ __forceinline__ uint32_t ld32_a4(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
// 64 and 128 bits from an 8- and a 16-byte-aligned address: blocks whose size is a multiple of 8
// (Q5_1, IQ4_XS) or 16 (Q4_K, Q5_K) are read in those, one load where four 32-bit ones were, and
// the regrouped blocks' aligned fields (quant/group8.h).
__device__ __forceinline__ uint2 ld64_a8(const uint8_t* p) { return *reinterpret_cast<const uint2*>(p); }
__device__ __forceinline__ uint4 ld128_a16(const uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }

template <int kOff>
__device__ __forceinline__ uint32_t minus(uint32_t q) {  // per byte: q - kOff, as int8
  if (kOff == 0) return q;
  return (q + (uint32_t)(128 - kOff) * 0x01010101u) ^ 0x80808080u;
}

// fp16 bits to float: the hardware conversion on the GPU (exact for every non-NaN value, so the
// same bits as half.h's fp16_to_f32, whose integer routine branches for subnormals: ~100 more
// instructions per kernel), half.h's routine on the host (tests/cpp/test_matvec_pieces.cpp).
__device__ __forceinline__ float h2f(uint32_t h) {
#ifdef __CUDA_ARCH__
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)h));
  return f;
#else
  return fp16_to_f32((uint16_t)h);
#endif
}

// Bits 0..3 of b moved to bit 4 of bytes 0..3 (Q5's fifth bit).
__device__ __forceinline__ uint32_t spread4(uint32_t b) {
  return ((b & 1u) << 4) | ((b & 2u) << 11) | ((b & 4u) << 18) | ((b & 8u) << 25);
}

// IQ4_NL's 16 code values (blocks.h kvalues_iq4nl) as four little-endian words.
__device__ __forceinline__ uint32_t lut_word(int i) {
  uint32_t v = 0;
  for (int b = 0; b < 4; ++b) v |= (uint32_t)(uint8_t)kvalues_iq4nl(4 * i + b) << (8 * b);
  return v;
}
// Four 4-bit indices (one per byte) to their int8 code values: byte_perm picks a byte from one
// half-table by the index's low 3 bits (prmt reads bit 3 of a selector as a sign mode, so it is
// masked off), bit 3 chooses the half.
__device__ __forceinline__ uint32_t lut16(uint32_t idx) {
  const uint32_t sel = (idx & 7u) | ((idx >> 4) & 0x70u) | ((idx >> 8) & 0x700u) | ((idx >> 12) & 0x7000u);
  const uint32_t lo = __byte_perm(lut_word(0), lut_word(1), sel);
  const uint32_t hi = __byte_perm(lut_word(2), lut_word(3), sel);
  const uint32_t upper = ((idx >> 3) & 0x01010101u) * 0xFFu;  // 0xFF in each byte whose index >= 8
  return (lo & ~upper) | (hi & upper);
}

// Q4_K / Q5_K scale and min of sub-block j from the scale words s0..s2 (blocks.h get_scale_min_k4).
__device__ __forceinline__ void scale_min_k4(int j, uint32_t s0, uint32_t s1, uint32_t s2, float& sc, float& mn) {
  const int sh = 8 * (j & 3);
  const uint32_t b0 = (s0 >> sh) & 0xFFu, b1 = (s1 >> sh) & 0xFFu, b2 = (s2 >> sh) & 0xFFu;
  if (j < 4) {
    sc = (float)(b0 & 63u);
    mn = (float)(b1 & 63u);
  } else {
    sc = (float)((b2 & 0xFu) | ((b0 >> 6) << 4));
    mn = (float)((b2 >> 4) | ((b1 >> 6) << 4));
  }
}

// Column offsets of a group's words: nibble types' qs words q0, q1 = bytes 8k..8k+7 hold
// values 8k..8k+7 (low nibbles) and 16+8k.. (high nibbles), words at 8k + {0, 4, 16, 20};
// contiguous types' at 4i.
__host__ __device__ constexpr int nibble_off(int i) { return 4 * (i & 1) + 16 * (i >> 1); }
__host__ __device__ constexpr int contiguous_off(int i) { return 4 * i; }

// A nibble piece's four words from its qs words q0, q1 — low nibbles, then high, at nibble_off —
// each passed through the type's code map(word, i) (minus<8>, lut16, adding Q5's fifth bits...).
template <typename Map>
__device__ __forceinline__ void nibble_words(uint32_t q0, uint32_t q1, uint32_t (&w)[4], Map map) {
  w[0] = map(q0 & kLow4, 0);
  w[1] = map(q1 & kLow4, 1);
  w[2] = map((q0 >> 4) & kLow4, 2);
  w[3] = map((q1 >> 4) & kLow4, 3);
}

}  // namespace pieces

template <typename B>
struct Piece;

// ---- 32-value blocks: 2 lanes per block, lane k takes 16 values ------------------------------
// Q4_0 and IQ4_NL share a byte layout (fp16 d, 16 bytes of nibbles) and differ in what a nibble
// means: Code maps a word of four nibbles to four int8 values.
template <typename Code>
struct PieceNibble32 {
  static constexpr int kLanes = 2, G = 1, W = 4;
  static constexpr bool kMin = false;
  __host__ __device__ static constexpr int off(int i) { return pieces::nibble_off(i); }
  struct Raw { uint32_t q0, q1, d; };
  __device__ static Raw load(const uint8_t* b, int k) {
    using namespace pieces;
    return {ld32_a2(b + 2 + 8 * k), ld32_a2(b + 6 + 8 * k), ld16(b)};
  }
  __device__ static PieceVals<G, W> unpack(const Raw& r, int k) {
    PieceVals<G, W> v;
    pieces::nibble_words(r.q0, r.q1, v.w[0], [](uint32_t x, int) { return Code::map(x); });
    v.col[0] = 8 * k;
    v.d[0] = pieces::h2f(r.d);
    v.m[0] = 0.f;
    return v;
  }
};
struct CodeQ4_0 {  // q - 8
  __device__ static uint32_t map(uint32_t x) { return pieces::minus<8>(x); }
};
struct CodeIQ4NL {  // the IQ4_NL code table
  __device__ static uint32_t map(uint32_t x) { return pieces::lut16(x); }
};
template <>
struct Piece<block_q4_0> : PieceNibble32<CodeQ4_0> {};
template <>
struct Piece<block_iq4_nl> : PieceNibble32<CodeIQ4NL> {};

template <>
struct Piece<block_q4_1> {
  static constexpr int kLanes = 2, G = 1, W = 4;
  static constexpr bool kMin = true;
  __host__ __device__ static constexpr int off(int i) { return pieces::nibble_off(i); }
  struct Raw { uint32_t q0, q1, dm; };
  __device__ static Raw load(const uint8_t* b, int k) {
    using namespace pieces;
    return {ld32_a4(b + 4 + 8 * k), ld32_a4(b + 8 + 8 * k), ld32_a4(b)};
  }
  __device__ static PieceVals<G, W> unpack(const Raw& r, int k) {
    using namespace pieces;
    PieceVals<G, W> v;
    nibble_words(r.q0, r.q1, v.w[0], [](uint32_t x, int) { return x; });
    v.col[0] = 8 * k;
    v.d[0] = h2f(r.dm);
    v.m[0] = k == 0 ? h2f((r.dm >> 16)) : 0.f;
    return v;
  }
};

// Q5: the fifth bits of values 8k..8k+7 are qh bits 8k.., of values 16+8k.. bits 16+8k...
template <int kOffset>
__device__ __forceinline__ void unpack_q5(uint32_t q0, uint32_t q1, uint32_t qh, int k, PieceVals<1, 4>& v) {
  using namespace pieces;
  // word i holds values 8k + nibble_off(i) .. +3, whose fifth bits start at that bit of qh
  const uint32_t h = qh >> (8 * k);
  nibble_words(q0, q1, v.w[0], [h](uint32_t x, int i) {
    return minus<kOffset>(x | spread4((h >> nibble_off(i)) & 0xFu));
  });
  v.col[0] = 8 * k;
}

template <>
struct Piece<block_q5_0> {
  static constexpr int kLanes = 2, G = 1, W = 4;
  static constexpr bool kMin = false;
  __host__ __device__ static constexpr int off(int i) { return pieces::nibble_off(i); }
  struct Raw { uint32_t q0, q1, qh, d; };
  __device__ static Raw load(const uint8_t* b, int k) {
    using namespace pieces;
    return {ld32_a2(b + 6 + 8 * k), ld32_a2(b + 10 + 8 * k), ld32_a2(b + 2), ld16(b)};
  }
  __device__ static PieceVals<G, W> unpack(const Raw& r, int k) {
    PieceVals<G, W> v;
    unpack_q5<16>(r.q0, r.q1, r.qh, k, v);
    v.d[0] = pieces::h2f(r.d);
    v.m[0] = 0.f;
    return v;
  }
};

template <>
struct Piece<block_q5_1> {
  static constexpr int kLanes = 2, G = 1, W = 4;
  static constexpr bool kMin = true;
  __host__ __device__ static constexpr int off(int i) { return pieces::nibble_off(i); }
  struct Raw { uint32_t q0, q1, qh, dm; };
  __device__ static Raw load(const uint8_t* b, int k) {
    using namespace pieces;
    const uint2 q = ld64_a8(b + 8 + 8 * k), head = ld64_a8(b);  // head: dm, qh
    return {q.x, q.y, head.y, head.x};
  }
  __device__ static PieceVals<G, W> unpack(const Raw& r, int k) {
    PieceVals<G, W> v;
    unpack_q5<0>(r.q0, r.q1, r.qh, k, v);
    v.d[0] = pieces::h2f(r.dm);
    v.m[0] = k == 0 ? pieces::h2f((r.dm >> 16)) : 0.f;
    return v;
  }
};

// Q8_0: lane k takes qs bytes 16k..16k+15, values 16k..16k+15.
template <>
struct Piece<block_q8_0> {
  static constexpr int kLanes = 2, G = 1, W = 4;
  static constexpr bool kMin = false;
  __host__ __device__ static constexpr int off(int i) { return pieces::contiguous_off(i); }
  struct Raw { uint32_t q[4], d; };
  __device__ static Raw load(const uint8_t* b, int k) {
    using namespace pieces;
    const uint8_t* q = b + 2 + 16 * k;
    return {{ld32_a2(q), ld32_a2(q + 4), ld32_a2(q + 8), ld32_a2(q + 12)}, ld16(b)};
  }
  __device__ static PieceVals<G, W> unpack(const Raw& r, int k) {
    PieceVals<G, W> v;
    for (int i = 0; i < 4; ++i) v.w[0][i] = r.q[i];
    v.col[0] = 16 * k;
    v.d[0] = pieces::h2f(r.d);
    v.m[0] = 0.f;
    return v;
  }
};

// ---- 256-value blocks -----------------------------------------------------------------------
// Q4_K / Q5_K: 8 lanes per block. Lane k: 64-value chunk c = k/2, qs bytes j0 = 16(k%2) .. +15
// of the chunk's 32, i.e. values j0.. of sub-block 2c (low nibbles) and of 2c+1 (high nibbles).
template <bool kQ5>
struct PieceK45 {
  static constexpr int kLanes = 8, G = 2, W = 4;
  static constexpr bool kMin = true;
  __host__ __device__ static constexpr int off(int i) { return pieces::contiguous_off(i); }
  struct Raw { uint32_t q[4], h[kQ5 ? 4 : 1], dd, s0, s1, s2; };
  __device__ static Raw load(const uint8_t* b, int k) {
    using namespace pieces;
    const int c = k >> 1, j0 = 16 * (k & 1);
    const uint8_t* qs = b + (kQ5 ? 48 : 16) + 32 * c + j0;
    Raw r;
    const uint4 q = ld128_a16(qs), head = ld128_a16(b);  // head: d and dmin, the 12 scale bytes
    r.q[0] = q.x; r.q[1] = q.y; r.q[2] = q.z; r.q[3] = q.w;
    if constexpr (kQ5) {
      const uint4 h = ld128_a16(b + 16 + j0);
      r.h[0] = h.x; r.h[1] = h.y; r.h[2] = h.z; r.h[3] = h.w;
    }
    r.dd = head.x;
    r.s0 = head.y;
    r.s1 = head.z;
    r.s2 = head.w;
    return r;
  }
  __device__ static PieceVals<G, W> unpack(const Raw& r, int k) {
    using namespace pieces;
    PieceVals<G, W> v;
    const int c = k >> 1, j0 = 16 * (k & 1);
    for (int i = 0; i < 4; ++i) {
      v.w[0][i] = r.q[i] & kLow4;
      v.w[1][i] = (r.q[i] >> 4) & kLow4;
      if (kQ5) {
        v.w[0][i] |= ((r.h[i] >> (2 * c)) & 0x01010101u) << 4;
        v.w[1][i] |= ((r.h[i] >> (2 * c + 1)) & 0x01010101u) << 4;
      }
    }
    const float d = h2f(r.dd), dmin = h2f((r.dd >> 16));
    for (int g = 0; g < 2; ++g) {
      float sc, mn;
      scale_min_k4(2 * c + g, r.s0, r.s1, r.s2, sc, mn);
      v.col[g] = 64 * c + 32 * g + j0;
      v.d[g] = d * sc;
      v.m[g] = j0 == 0 ? -dmin * mn : 0.f;
    }
    return v;
  }
};
template <>
struct Piece<block_q4_k> : PieceK45<false> {};
template <>
struct Piece<block_q5_k> : PieceK45<true> {};

// Q6_K: 8 lanes per block. Lane k: half n = k/4, l0 = 8(k%4): ql bytes l0..l0+7 of the half's
// two 32-byte rows and qh bytes l0..l0+7 give values 128n + 32r + l0.. for r = 0..3 (blocks.h);
// each r is its own group (its own 32-block of x), with the scale of its 16-value half.
template <>
struct Piece<block_q6_k> {
  static constexpr int kLanes = 8, G = 4, W = 2;
  static constexpr bool kMin = false;
  __host__ __device__ static constexpr int off(int i) { return pieces::contiguous_off(i); }
  struct Raw { uint32_t l0[2], l1[2], h[2], sc[4], d; };
  __device__ static Raw load(const uint8_t* b, int k) {
    using namespace pieces;
    const int n = k >> 2, l0 = 8 * (k & 3);
    Raw r;
    for (int i = 0; i < 2; ++i) {
      r.l0[i] = ld32_a2(b + 64 * n + l0 + 4 * i);
      r.l1[i] = ld32_a2(b + 64 * n + 32 + l0 + 4 * i);
      r.h[i] = ld32_a2(b + 128 + 32 * n + l0 + 4 * i);
    }
    for (int q = 0; q < 4; ++q) r.sc[q] = ld16(b + 192 + 8 * n + 2 * q);  // scales 2q, 2q+1 of the half
    r.d = ld16(b + 208);
    return r;
  }
  __device__ static PieceVals<G, W> unpack(const Raw& r, int k) {
    using namespace pieces;
    PieceVals<G, W> v;
    const int n = k >> 2, l0 = 8 * (k & 3);
    for (int i = 0; i < 2; ++i) {
      v.w[0][i] = minus<32>((r.l0[i] & kLow4) | ((r.h[i] << 4) & 0x30303030u));
      v.w[1][i] = minus<32>((r.l1[i] & kLow4) | ((r.h[i] << 2) & 0x30303030u));
      v.w[2][i] = minus<32>(((r.l0[i] >> 4) & kLow4) | (r.h[i] & 0x30303030u));
      v.w[3][i] = minus<32>(((r.l1[i] >> 4) & kLow4) | ((r.h[i] >> 2) & 0x30303030u));
    }
    const float d = h2f(r.d);
    const int h = l0 >= 16 ? 8 : 0;  // which of the 32-block's two 16-value scales
    for (int q = 0; q < 4; ++q) {
      v.col[q] = 128 * n + 32 * q + l0;
      v.d[q] = d * (float)(int8_t)(r.sc[q] >> h);
      v.m[q] = 0.f;
    }
    return v;
  }
};

// IQ4_XS: 16 lanes per block, 2 per sub-block sb = k/2, qs bytes 8(k%2).. of its 16 (the
// nibble layout of IQ4_NL, one 32-value sub-block each).
template <>
struct Piece<block_iq4_xs> {
  static constexpr int kLanes = 16, G = 1, W = 4;
  static constexpr bool kMin = false;
  __host__ __device__ static constexpr int off(int i) { return pieces::nibble_off(i); }
  struct Raw { uint32_t q0, q1, dh, sl; };
  __device__ static Raw load(const uint8_t* b, int k) {
    using namespace pieces;
    // head: d and the high scale bits, then the low scale bits
    const uint2 q = ld64_a8(b + 8 + 16 * (k >> 1) + 8 * (k & 1)), head = ld64_a8(b);
    return {q.x, q.y, head.x, head.y};
  }
  __device__ static PieceVals<G, W> unpack(const Raw& r, int k) {
    using namespace pieces;
    PieceVals<G, W> v;
    const int sb = k >> 1;
    nibble_words(r.q0, r.q1, v.w[0], [](uint32_t x, int) { return lut16(x); });
    v.col[0] = 32 * sb + 8 * (k & 1);
    const int ls = (int)(((r.sl >> (4 * sb)) & 0xFu) | (((r.dh >> (16 + 2 * sb)) & 3u) << 4)) - 32;
    v.d[0] = h2f(r.dh) * (float)ls;
    v.m[0] = 0.f;
    return v;
  }
};

// ---- the group-of-eight layout (quant/group8.h): aligned loads --------------------------------
// A lane's quant bytes come in aligned loads and its scale from the group's scale array.
// Q4_0: one lane per block, all 16 bytes (values 0..15 in the low nibbles, 16..31 in the high),
// so a warp load is 512 contiguous bytes: the fewer loads a warp has outstanding per byte, the
// more bytes the SM keeps in flight (doubling the blocks in flight per lane instead made the
// decode matvec slower: 14.3 -> 24.2 us for the 8B down projection). Q8_0: the GGUF piece's two
// lanes of 16 bytes each.
//
// A lane's group is a whole 32-value block, so the decode matvec can leave the nibbles as they
// are (0..15, unpack_raw) and take the 8 off once per block as 8 · Σq with Σq the activations'
// integer sum (kOffset): two integer instructions per word fewer, the same integer per block.
template <>
struct Piece<Group8<block_q4_0>> {
  static constexpr int kLanes = 1, G = 1, W = 8;
  static constexpr bool kMin = false;
  static constexpr int kOffset = 8;  // unpack_raw's values are q + kOffset
  __host__ __device__ static constexpr int off(int i) { return pieces::contiguous_off(i); }
  struct Raw { uint32_t q[4], d; };
  __device__ static Raw load_at(const uint8_t* row, int64_t b, int) {
    const uint4 q = pieces::ld128_a16(row + group8_field_offset<block_q4_0>(1, (uint32_t)b));
    return {{q.x, q.y, q.z, q.w}, pieces::ld16(row + group8_field_offset<block_q4_0>(0, (uint32_t)b))};
  }
  __device__ static PieceVals<G, W> unpack_raw(const Raw& r, int) {
    PieceVals<G, W> v;
    for (int i = 0; i < 4; ++i) {
      v.w[0][i] = r.q[i] & pieces::kLow4;
      v.w[0][4 + i] = (r.q[i] >> 4) & pieces::kLow4;
    }
    v.col[0] = 0;
    v.d[0] = pieces::h2f(r.d);
    v.m[0] = 0.f;
    return v;
  }
  __device__ static PieceVals<G, W> unpack(const Raw& r, int k) {
    PieceVals<G, W> v = unpack_raw(r, k);
    for (int i = 0; i < W; ++i) v.w[0][i] = pieces::minus<8>(v.w[0][i]);
    return v;
  }
};
template <>
struct Piece<Group8<block_q8_0>> : Piece<block_q8_0> {
  static Raw load(const uint8_t*, int) = delete;  // the GGUF addressing: a regrouped row is read by load_at
  __device__ static Raw load_at(const uint8_t* row, int64_t b, int k) {
    const uint4 q = pieces::ld128_a16(row + group8_field_offset<block_q8_0>(1, (uint32_t)b) + 16 * k);
    return {{q.x, q.y, q.z, q.w}, pieces::ld16(row + group8_field_offset<block_q8_0>(0, (uint32_t)b))};
  }
};
// Q6_K: the GGUF piece's lanes and values; each of its three 8-byte runs (two of ql, one of qh)
// and its four scales are one 8-byte load, instead of two-byte loads.
template <>
struct Piece<Group8<block_q6_k>> : Piece<block_q6_k> {
  static Raw load(const uint8_t*, int) = delete;  // the GGUF addressing: a regrouped row is read by load_at
  __device__ static Raw load_at(const uint8_t* row, int64_t b, int k) {
    const int n = k >> 2, l0 = 8 * (k & 3);
    const uint32_t bb = (uint32_t)b;
    const uint8_t* ql = row + group8_field_offset<block_q6_k>(2, bb) + 64 * n + l0;
    const uint2 a = pieces::ld64_a8(ql), c = pieces::ld64_a8(ql + 32);
    const uint2 h = pieces::ld64_a8(row + group8_field_offset<block_q6_k>(3, bb) + 32 * n + l0);
    const uint2 s = pieces::ld64_a8(row + group8_field_offset<block_q6_k>(1, bb) + 8 * n);
    Raw r;
    r.l0[0] = a.x; r.l0[1] = a.y;
    r.l1[0] = c.x; r.l1[1] = c.y;
    r.h[0] = h.x; r.h[1] = h.y;
    r.sc[0] = s.x & 0xFFFFu; r.sc[1] = s.x >> 16; r.sc[2] = s.y & 0xFFFFu; r.sc[3] = s.y >> 16;
    r.d = pieces::ld16(row + group8_field_offset<block_q6_k>(0, bb));
    return r;
  }
};

template <typename Block>
struct IsGroup8 : std::false_type {};
template <typename B>
struct IsGroup8<Group8<B>> : std::true_type {};

// Piece k of block b of a weight row, in either layout.
template <typename Block>
__device__ __forceinline__ typename Piece<Block>::Raw piece_load(const uint8_t* row, int64_t b, int k) {
  if constexpr (IsGroup8<Block>::value) return Piece<Block>::load_at(row, b, k);
  else return Piece<Block>::load(row + (size_t)b * sizeof(Block), k);
}

// An address among the bytes piece k of block b reads — its quant bytes, the most of them — for
// rows_dots to prefetch into L2.
template <typename Block>
__device__ __forceinline__ const uint8_t* piece_bytes(const uint8_t* row, int64_t b, int k) {
  if constexpr (IsGroup8<Block>::value) {
    using B = typename StoredBlock<Block>::block;
    return row + group8_field_offset<B>(Group8Traits<B>::kQuantField, (uint32_t)b);
  } else {
    return row + (size_t)b * sizeof(Block) + k * (sizeof(Block) / Piece<Block>::kLanes);
  }
}

// The alignment a piece's loads need of the weight data and row stride: 16 bytes in the
// group-of-eight layout; else the largest of 16, 8, 4 dividing the block size (the loads above
// are that wide), else 2.
template <typename Block>
constexpr unsigned piece_alignment() {
  if constexpr (IsGroup8<Block>::value) return 16;
  else return sizeof(Block) % 16 == 0 ? 16 : sizeof(Block) % 8 == 0 ? 8 : sizeof(Block) % 4 == 0 ? 4 : 2;
}

}  // namespace gaacrt::cuda
