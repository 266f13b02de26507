// gaac_lane.cuh — one lane's share of a GAAC tile decode (codec/gaac/gaac_format.h: lane map, code
// words, X and R escape streams): its 8 groups (64 values) from a staged slot into BF16 rows. Used
// by the tensor-core attention kernel (attention_tiles.cuh); host-compilable (plain C++ shims for
// the two PTX byte operations) so that bench/gaac_lane_host.cpp checks it bit for bit on the CPU.
//
// Cost model (bench/gaac_decode_sass.cu counts the SASS): every group takes the same lean,
// predicated path, and only the rare raw groups branch.
//   * every group: e = base + (low3 | bit3 << 3), base = b4 when the tag is 1 or 2, else b3 (one
//     multiply-add: the integer multiply runs on the FMA pipe, beside the logic ops' ALU pipe);
//     a raw group (tag 2) is therefore decoded wrong here and repaired below.
//   * X bytes: a lane's X bytes are consecutive in the X stream (lane-major group order), so two
//     unaligned 4-byte reads fetch those of groups 0..3 and 4..7, and one PRMT per 4 groups puts
//     each group's X byte in its byte lane (selector = prefix count of the groups with escapes,
//     or a zero byte) — no per-group escape loads, no per-group offset chain.
//   * bit 3 of 4 codes: (nibble * 0x01020408) & 0x08080808, merged into the codes by one LOP3.
//   * raw groups (about 0.2-0.3% of groups: a lane meets one in ~2% of tiles): a loop after the
//     lean pass reads the written BF16 back, undoes the b4 add exactly (32-bit subtraction), puts
//     in the R record's bits 4..7 and writes the group again.
#pragma once
#include <cstdint>
#include <cstring>

#include "codec/gaac/gaac_format.h"

#if defined(__CUDACC__)
#define GAAC_LANE_HD __host__ __device__ __forceinline__
#else
#define GAAC_LANE_HD inline
#endif

namespace gaacrt::cuda::attn {

struct GaacW4 {
  uint32_t x, y, z, w;
};

// PTX prmt.b32 (generic mode): selector nibble n picks byte n & 7 of {b, a}, and with n & 8 set
// replicates that byte's top bit. (Not __byte_perm: it uses only 3 bits of each nibble, so the
// sign-replicating selectors below would silently pick the plain byte.)
GAAC_LANE_HD uint32_t lane_prmt(uint32_t a, uint32_t b, uint32_t s) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
  return d;
#else
  const uint64_t v = ((uint64_t)b << 32) | a;
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) {
    const uint32_t n = (s >> (4 * k)) & 15u;
    uint32_t byte = (uint32_t)(v >> (8 * (n & 7))) & 0xFFu;
    if (n & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
    r |= byte << (8 * k);
  }
  return r;
#endif
}

GAAC_LANE_HD uint32_t lane_funnel_r(uint32_t lo, uint32_t hi, uint32_t sh) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(lo, hi, sh);
#else
  return (uint32_t)((((uint64_t)hi << 32) | lo) >> (sh & 31u));
#endif
}

GAAC_LANE_HD uint32_t lane_ld32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}
GAAC_LANE_HD GaacW4 lane_ld128(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  return GaacW4{v.x, v.y, v.z, v.w};
#else
  GaacW4 v;
  std::memcpy(&v, p, 16);
  return v;
#endif
}
GAAC_LANE_HD void lane_st128(uint16_t* p, GaacW4 v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4*>(p) = make_uint4(v.x, v.y, v.z, v.w);
#else
  std::memcpy(p, &v, 16);
#endif
}

// 4 bytes from byte offset o of a 4-byte-aligned stream (two aligned reads and a funnel shift).
GAAC_LANE_HD uint32_t lane_ld32_unaligned(const uint8_t* base, uint32_t o) {
  const uint8_t* p = base + (o & ~3u);
  return lane_funnel_r(lane_ld32(p), lane_ld32(p + 4), 8u * (o & 3u));
}

// (b & c) | (a & ~c) for a constant mask c: one LOP3 (the compiler otherwise splits it in two).
template <uint32_t kMask>
GAAC_LANE_HD uint32_t lane_mux_c(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xD8;" : "=r"(d) : "r"(a), "r"(b), "n"(kMask));
  return d;
#else
  return (b & kMask) | (a & ~kMask);
#endif
}

// x >> 1 as the high word of x * 2^31: an IMAD.HI, on the FMA pipe instead of the ALU's.
GAAC_LANE_HD uint32_t lane_shr1(uint32_t x) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  asm("mul.hi.u32 %0, %1, 0x80000000;" : "=r"(d) : "r"(x));
  return d;
#else
  return x >> 1;
#endif
}

// gaac_bf16x4 (codec/gaac/gaac_format.h) in 6 instructions: 2 shifts (one a multiply-high), 2 LOP3,
// 2 PRMT.
GAAC_LANE_HD GaacU32x2 lane_bf16x4(uint32_t sm, uint32_t e) {
  const uint32_t hb = lane_mux_c<0x80808080u>(lane_shr1(e), sm);  // s | e >> 1
  const uint32_t lb = lane_mux_c<0x80808080u>(sm, e << 7);  // (e & 1) << 7 | m
  return GaacU32x2{lane_prmt(lb, hb, 0x5140u), lane_prmt(lb, hb, 0x7362u)};
}

// The X bytes of 4 groups of a lane in byte lanes: byte j = X byte of group j when its tag (t8 bits
// 2j..2j+1) is 1 or 2, else 0. xq: the 4 escape bytes from the first X byte of these groups on.
// The PRMT selector's nibble j = number of the 4 groups before j with an X byte, or 4 + that (a
// byte of the zero operand) for a group without one.
GAAC_LANE_HD uint32_t lane_x_bytes(uint32_t t8, uint32_t xq) {
  const uint32_t h = (t8 | (t8 >> 1)) & 0x55u;  // bit 2j: group j has an X byte
  uint32_t y = (h | (h << 4)) & 0x0F0Fu;        // bits 0, 2, 8, 10
  y = (y | (y << 2)) & 0x1111u;                  // bit 4j
  const uint32_t sel = y * 0x1110u + ((y ^ 0x1111u) << 2);
  return lane_prmt(xq, 0u, sel);
}

// Lane li of a tile's td/4 decoders: its 8 groups (tokens 4i + 2h + jj, column gcol) from the
// staged slot into rows (`row` elements apart). tags: its tag bits (gaac_format.h gaac_lane_tags,
// which the caller has read for the escape offsets); xo / ro: its first X byte and R record in the
// escape area. Reads up to 8 bytes past the lane's last X byte (inside the caller's shared buffers;
// those bytes are never used).
GAAC_LANE_HD void decode_gaac_lane(const uint8_t* stg, int32_t td, int li, uint32_t tags, uint32_t xo, uint32_t ro,
                                   GaacU32x2 b3, GaacU32x2 b4, uint16_t* dst, int row) {
  const int32_t G = gaac_group_cols(td), nl = gaac_lanes(td);
  const int h = li >= G ? 1 : 0, gcol = li - h * G;
  const uint8_t* esc = stg + gaac_fixed_bytes(td);
  const GaacW4 wa = lane_ld128(stg + gaac_codes_a_offset(td) + 16 * li);
  const uint8_t* pb = stg + gaac_codes_b_offset(td) + 8 * li;
  const uint32_t w[6] = {wa.x, wa.y, wa.z, wa.w, lane_ld32(pb), lane_ld32(pb + 4)};
  const uint32_t hx = (tags | (tags >> 1)) & 0x5555u;  // bit 2j: group j has an X byte (tag 1 or 2)
  const uint32_t n0 = gaac_popc(hx & 0x55u);
  const uint32_t xb0 = lane_x_bytes(tags & 0xFFu, lane_ld32_unaligned(esc, xo));
  const uint32_t xb1 = lane_x_bytes(tags >> 8, lane_ld32_unaligned(esc, xo + n0));
  const uint32_t xl[2] = {xb0 & 0x0F0F0F0Fu, xb1 & 0x0F0F0F0Fu};
  const uint32_t xh[2] = {(xb0 >> 4) & 0x0F0F0F0Fu, (xb1 >> 4) & 0x0F0F0F0Fu};
  // Bit 7 of byte k of hw[q] = "group 4q + k has an X byte": h * 0x02082080 moves bit 2k to 8k + 7
  // (the other copies and their carries stay off those bits), and a sign-replicating PRMT turns
  // it into a whole-word mask m (0, or -1 for a group with an X byte), which picks the base below.
  const uint32_t hw[2] = {(hx & 0x55u) * 0x02082080u, ((hx >> 8) & 0x55u) * 0x02082080u};
  // The base by a multiply (the FMA pipe; the integer ALU pipe is the one the decode fills):
  // e = b3 + c + m * (b3 - b4) with m = 0 or -1 is b3 + c or b4 + c, exactly, in 32-bit modular
  // arithmetic — the borrows of b3 - b4 between byte lanes cancel, and b4 + c has no carries.
  const GaacU32x2 d34{b3.lo - b4.lo, b3.hi - b4.hi};
  uint16_t* out = dst + 8 * gcol + 2 * h * row;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const GaacW4 sm = lane_ld128(stg + 16 * (i * nl + li));
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const int j = 2 * i + jj, q = j >> 2, k = j & 3;
      const uint32_t m = lane_prmt(hw[q], 0u, 0x8888u + 0x1111u * (uint32_t)k);
      const GaacU32x2 low3 = gaac_group_codes(w[3 * q], w[3 * q + 1], w[3 * q + 2], k);
      const uint32_t nlo = lane_prmt(xl[q], 0u, 0x4440u | (uint32_t)k), nhi = lane_prmt(xh[q], 0u, 0x4440u | (uint32_t)k);
      const uint32_t c_lo = low3.lo | ((nlo * 0x01020408u) & 0x08080808u);
      const uint32_t c_hi = low3.hi | ((nhi * 0x01020408u) & 0x08080808u);
      const uint32_t e_lo = m * d34.lo + (b3.lo + c_lo), e_hi = m * d34.hi + (b3.hi + c_hi);
      const GaacU32x2 p = lane_bf16x4(jj ? sm.z : sm.x, e_lo);
      const GaacU32x2 r = lane_bf16x4(jj ? sm.w : sm.y, e_hi);
      lane_st128(out + (4 * i + jj) * row, GaacW4{p.lo, p.hi, r.lo, r.hi});
    }
  }
  // Raw groups (tag 2) went through the 4-bit path: written e' = b4 + c (one 32-bit add per 4
  // channels, carries between byte lanes included), c = low3 | bit3 << 3 < 16. The 32-bit add is
  // undone exactly (c = e' - b4), bits 4..7 come from the R record: e = c | r << 4.
  for (uint32_t rm = (tags >> 1) & ~tags & 0x5555u; rm != 0u; rm &= rm - 1u, ro += 4u) {
    const int j = (int)(gaac_popc((rm & (0u - rm)) - 1u) >> 1);
    const uint32_t r4 = lane_ld32_unaligned(esc, ro);
    uint16_t* o = out + (4 * (j >> 1) + (j & 1)) * row;
    GaacW4 v = lane_ld128(reinterpret_cast<const uint8_t*>(o));
    const uint32_t e_lo = lane_prmt((v.x >> 7) & 0x00FF00FFu, (v.y >> 7) & 0x00FF00FFu, 0x6420u) - b4.lo;
    const uint32_t e_hi = lane_prmt((v.z >> 7) & 0x00FF00FFu, (v.w >> 7) & 0x00FF00FFu, 0x6420u) - b4.hi;
    const uint32_t f_lo = e_lo | ((r4 & 0x0F0F0F0Fu) << 4), f_hi = e_hi | (r4 & 0xF0F0F0F0u);
    v.x = (v.x & 0x807F807Fu) | (lane_prmt(f_lo, 0u, 0x4140u) << 7);
    v.y = (v.y & 0x807F807Fu) | (lane_prmt(f_lo, 0u, 0x4342u) << 7);
    v.z = (v.z & 0x807F807Fu) | (lane_prmt(f_hi, 0u, 0x4140u) << 7);
    v.w = (v.w & 0x807F807Fu) | (lane_prmt(f_hi, 0u, 0x4342u) << 7);
    lane_st128(o, v);
  }
}

}  // namespace gaacrt::cuda::attn
