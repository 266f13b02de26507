// matvec_pieces.cuh — how the int8 decode matvec (matvec_q8.cu) reads a quantized weight row.
//
// The row is cut into pieces: Piece<B>::kLanes consecutive lanes share one block, each taking a
// few contiguous bytes of it, so one warp-wide load reads one contiguous span of the row (eight
// Q4_0 blocks, 144 bytes, in a couple of L1 wavefronts). Reading whole 18-byte blocks per lane
// instead cost 17 byte-wide loads per lane, each spanning 576 bytes: the L1, not DRAM, was the
// limit (0.65 TB/s on the H200).
//
// Piece<B>: kLanes (lanes per block), G groups of W words each, kStep (columns between a group's
// words), kMin (whether m is used), and load(block bytes, lane's part) -> PieceVals.
//
// A piece unpacks to G groups of W int8x4 words; a group's words lie in one 32-value block of x
// (the unit of x's int8 scale) and share one weight scale d, so its contribution per token is
//     xd · (d · Σ dp4a(w, xq)) + m · xs          (xs = xd · Σ xq over that 32-block)
// m is the block minimum term (Q4_1, Q5_1, K-quants' -dmin·mn); only the group's first lane
// carries it, so it is added once per 32 values. Offsets (Q4_0's -8, Q6_K's -32) are applied per
// byte when unpacking: (q + 128 - off) ^ 0x80 is q - off as a signed byte, with no carry between
// bytes because q + 128 - off < 256.
#pragma once
#include <cstdint>

#include "common/half.h"
#include "quant/blocks.h"

namespace gaacrt::cuda {

template <int G, int W>
struct PieceVals {
  uint32_t w[G][W];  // int8x4 weights
  int col[G];        // column of w[g][0] within the block; w[g][i] sits at col[g] + step·i
  float d[G], m[G];
};

namespace pieces {

constexpr uint32_t kLow4 = 0x0F0F0F0Fu;

__device__ __forceinline__ uint32_t ld16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
// 32 bits from a 2-byte-aligned address (blocks of 18, 22, 34 and 210 bytes).
__device__ __forceinline__ uint32_t ld32_a2(const uint8_t* p) { return ld16(p) | (ld16(p + 2) << 16); }
// 32 bits from a 4-byte-aligned address (blocks whose size is a multiple of 4; launchers check
// the data pointer).
__device__ __forceinline__ uint32_t ld32_a4(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

template <int kOff>
__device__ __forceinline__ uint32_t minus(uint32_t q) {  // per byte: q - kOff, as int8
  return (q + (uint32_t)(128 - kOff) * 0x01010101u) ^ 0x80808080u;
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

}  // namespace pieces

template <typename B>
struct Piece;

// ---- 32-value blocks: 4 lanes per block, lane k takes 8 values ------------------------------
// Nibble types: qs bytes 4k..4k+3, i.e. values 4k..4k+3 (low nibbles) and 16+4k.. (high).
template <>
struct Piece<block_q4_0> {
  static constexpr int kLanes = 4, G = 1, W = 2, kStep = 16;
  static constexpr bool kMin = false;
  __device__ static PieceVals<G, W> load(const uint8_t* b, int k) {
    using namespace pieces;
    PieceVals<G, W> v;
    const uint32_t q = ld32_a2(b + 2 + 4 * k);
    v.w[0][0] = minus<8>(q & kLow4);
    v.w[0][1] = minus<8>((q >> 4) & kLow4);
    v.col[0] = 4 * k;
    v.d[0] = fp16_to_f32((uint16_t)ld16(b));
    v.m[0] = 0.f;
    return v;
  }
};

template <>
struct Piece<block_iq4_nl> {
  static constexpr int kLanes = 4, G = 1, W = 2, kStep = 16;
  static constexpr bool kMin = false;
  __device__ static PieceVals<G, W> load(const uint8_t* b, int k) {
    using namespace pieces;
    PieceVals<G, W> v;
    const uint32_t q = ld32_a2(b + 2 + 4 * k);
    v.w[0][0] = lut16(q & kLow4);
    v.w[0][1] = lut16((q >> 4) & kLow4);
    v.col[0] = 4 * k;
    v.d[0] = fp16_to_f32((uint16_t)ld16(b));
    v.m[0] = 0.f;
    return v;
  }
};

template <>
struct Piece<block_q4_1> {
  static constexpr int kLanes = 4, G = 1, W = 2, kStep = 16;
  static constexpr bool kMin = true;
  __device__ static PieceVals<G, W> load(const uint8_t* b, int k) {
    using namespace pieces;
    PieceVals<G, W> v;
    const uint32_t dm = ld32_a4(b), q = ld32_a4(b + 4 + 4 * k);
    v.w[0][0] = q & kLow4;
    v.w[0][1] = (q >> 4) & kLow4;
    v.col[0] = 4 * k;
    v.d[0] = fp16_to_f32((uint16_t)dm);
    v.m[0] = k == 0 ? fp16_to_f32((uint16_t)(dm >> 16)) : 0.f;
    return v;
  }
};

template <>
struct Piece<block_q5_0> {
  static constexpr int kLanes = 4, G = 1, W = 2, kStep = 16;
  static constexpr bool kMin = false;
  __device__ static PieceVals<G, W> load(const uint8_t* b, int k) {
    using namespace pieces;
    PieceVals<G, W> v;
    const uint32_t qh = ld32_a2(b + 2), q = ld32_a2(b + 6 + 4 * k);
    v.w[0][0] = minus<16>((q & kLow4) | spread4((qh >> (4 * k)) & 0xFu));
    v.w[0][1] = minus<16>(((q >> 4) & kLow4) | spread4((qh >> (16 + 4 * k)) & 0xFu));
    v.col[0] = 4 * k;
    v.d[0] = fp16_to_f32((uint16_t)ld16(b));
    v.m[0] = 0.f;
    return v;
  }
};

template <>
struct Piece<block_q5_1> {
  static constexpr int kLanes = 4, G = 1, W = 2, kStep = 16;
  static constexpr bool kMin = true;
  __device__ static PieceVals<G, W> load(const uint8_t* b, int k) {
    using namespace pieces;
    PieceVals<G, W> v;
    const uint32_t dm = ld32_a4(b), qh = ld32_a4(b + 4), q = ld32_a4(b + 8 + 4 * k);
    v.w[0][0] = (q & kLow4) | spread4((qh >> (4 * k)) & 0xFu);
    v.w[0][1] = ((q >> 4) & kLow4) | spread4((qh >> (16 + 4 * k)) & 0xFu);
    v.col[0] = 4 * k;
    v.d[0] = fp16_to_f32((uint16_t)dm);
    v.m[0] = k == 0 ? fp16_to_f32((uint16_t)(dm >> 16)) : 0.f;
    return v;
  }
};

// Q8_0: lane k takes qs bytes 8k..8k+7, values 8k..8k+7.
template <>
struct Piece<block_q8_0> {
  static constexpr int kLanes = 4, G = 1, W = 2, kStep = 4;
  static constexpr bool kMin = false;
  __device__ static PieceVals<G, W> load(const uint8_t* b, int k) {
    using namespace pieces;
    PieceVals<G, W> v;
    v.w[0][0] = ld32_a2(b + 2 + 8 * k);
    v.w[0][1] = ld32_a2(b + 6 + 8 * k);
    v.col[0] = 8 * k;
    v.d[0] = fp16_to_f32((uint16_t)ld16(b));
    v.m[0] = 0.f;
    return v;
  }
};

// ---- 256-value blocks -----------------------------------------------------------------------
// Q4_K / Q5_K: 16 lanes per block. Lane k: 64-value chunk c = k/4, qs bytes j0 = 8(k%4) .. +7 of
// the chunk's 32, i.e. values j0.. of sub-block 2c (low nibbles) and of 2c+1 (high nibbles).
template <bool kQ5>
__device__ __forceinline__ PieceVals<2, 2> load_k4(const uint8_t* b, int k) {
  using namespace pieces;
  PieceVals<2, 2> v;
  const int c = k >> 2, j0 = 8 * (k & 3);
  const uint32_t dd = ld32_a4(b), s0 = ld32_a4(b + 4), s1 = ld32_a4(b + 8), s2 = ld32_a4(b + 12);
  const uint8_t* qs = b + (kQ5 ? 48 : 16) + 32 * c + j0;
  const uint32_t q0 = ld32_a4(qs), q1 = ld32_a4(qs + 4);
  v.w[0][0] = q0 & kLow4;
  v.w[0][1] = q1 & kLow4;
  v.w[1][0] = (q0 >> 4) & kLow4;
  v.w[1][1] = (q1 >> 4) & kLow4;
  if (kQ5) {
    const uint32_t h0 = ld32_a4(b + 16 + j0), h1 = ld32_a4(b + 20 + j0);
    v.w[0][0] |= ((h0 >> (2 * c)) & 0x01010101u) << 4;
    v.w[0][1] |= ((h1 >> (2 * c)) & 0x01010101u) << 4;
    v.w[1][0] |= ((h0 >> (2 * c + 1)) & 0x01010101u) << 4;
    v.w[1][1] |= ((h1 >> (2 * c + 1)) & 0x01010101u) << 4;
  }
  const float d = fp16_to_f32((uint16_t)dd), dmin = fp16_to_f32((uint16_t)(dd >> 16));
  for (int g = 0; g < 2; ++g) {
    float sc, mn;
    scale_min_k4(2 * c + g, s0, s1, s2, sc, mn);
    v.col[g] = 64 * c + 32 * g + j0;
    v.d[g] = d * sc;
    v.m[g] = (k & 3) == 0 ? -dmin * mn : 0.f;
  }
  return v;
}

template <>
struct Piece<block_q4_k> {
  static constexpr int kLanes = 16, G = 2, W = 2, kStep = 4;
  static constexpr bool kMin = true;
  __device__ static PieceVals<G, W> load(const uint8_t* b, int k) { return load_k4<false>(b, k); }
};
template <>
struct Piece<block_q5_k> {
  static constexpr int kLanes = 16, G = 2, W = 2, kStep = 4;
  static constexpr bool kMin = true;
  __device__ static PieceVals<G, W> load(const uint8_t* b, int k) { return load_k4<true>(b, k); }
};

// Q6_K: 16 lanes per block. Lane k: half n = k/8, l0 = 4(k%8): ql bytes l0..l0+3 of the half's
// two 32-byte rows and qh bytes l0..l0+3 give values 128n + 32r + l0.. for r = 0..3 (blocks.h).
template <>
struct Piece<block_q6_k> {
  static constexpr int kLanes = 16, G = 4, W = 1, kStep = 4;
  static constexpr bool kMin = false;
  __device__ static PieceVals<G, W> load(const uint8_t* b, int k) {
    using namespace pieces;
    PieceVals<G, W> v;
    const int n = k >> 3, l0 = 4 * (k & 7);
    const uint32_t ql0 = ld32_a2(b + 64 * n + l0), ql1 = ld32_a2(b + 64 * n + 32 + l0);
    const uint32_t qh = ld32_a2(b + 128 + 32 * n + l0);
    const uint32_t sc_lo = ld32_a2(b + 192 + 8 * n), sc_hi = ld32_a2(b + 196 + 8 * n);
    const float d = fp16_to_f32((uint16_t)ld16(b + 208));
    v.w[0][0] = minus<32>((ql0 & kLow4) | ((qh << 4) & 0x30303030u));
    v.w[1][0] = minus<32>((ql1 & kLow4) | ((qh << 2) & 0x30303030u));
    v.w[2][0] = minus<32>(((ql0 >> 4) & kLow4) | (qh & 0x30303030u));
    v.w[3][0] = minus<32>(((ql1 >> 4) & kLow4) | ((qh >> 2) & 0x30303030u));
    const int h = l0 >= 16 ? 8 : 0;  // which of the 32-block's two 16-value scales
    const int8_t s[4] = {(int8_t)(sc_lo >> h), (int8_t)(sc_lo >> (16 + h)), (int8_t)(sc_hi >> h),
                         (int8_t)(sc_hi >> (16 + h))};
    for (int r = 0; r < 4; ++r) {
      v.col[r] = 128 * n + 32 * r + l0;
      v.d[r] = d * (float)s[r];
      v.m[r] = 0.f;
    }
    return v;
  }
};

// IQ4_XS: 32 lanes per block, 4 per sub-block sb = k/4, qs bytes j = 4(k%4).. of its 16.
template <>
struct Piece<block_iq4_xs> {
  static constexpr int kLanes = 32, G = 1, W = 2, kStep = 16;
  static constexpr bool kMin = false;
  __device__ static PieceVals<G, W> load(const uint8_t* b, int k) {
    using namespace pieces;
    PieceVals<G, W> v;
    const int sb = k >> 2, j = 4 * (k & 3);
    const uint32_t dh = ld32_a4(b), sl = ld32_a4(b + 4), q = ld32_a4(b + 8 + 16 * sb + j);
    v.w[0][0] = lut16(q & kLow4);
    v.w[0][1] = lut16((q >> 4) & kLow4);
    v.col[0] = 32 * sb + j;
    const int ls = (int)(((sl >> (4 * sb)) & 0xFu) | (((dh >> (16 + 2 * sb)) & 3u) << 4)) - 32;
    v.d[0] = fp16_to_f32((uint16_t)dh) * (float)ls;
    v.m[0] = 0.f;
    return v;
  }
};

// Block sizes that are multiples of 4 are read with 32-bit loads: their data must be 4-aligned.
template <typename B>
constexpr bool piece_needs_align4() {
  return sizeof(B) % 4 == 0;
}

}  // namespace gaacrt::cuda
