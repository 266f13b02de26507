// vec_dot_util.h — small helpers the scalar, AVX2 and NEON vec_dot files share.
#pragma once
#include <cstdint>
#include <cstring>

#include "quant/blocks.h"

namespace gaacrt::cpu {

// Q4_K/Q5_K: all 8 six-bit scales and mins at once from the packed 12 bytes (spec §2.4), as
// bytes, with word operations instead of eight get_scale_min_k4 calls:
//   bytes 0-3  = sc0..3 (low 6 bits) | high bits of sc4..7 (top 2 bits)
//   bytes 4-7  = mn0..3 (low 6 bits) | high bits of mn4..7 (top 2 bits)
//   bytes 8-11 = low nibbles of sc4..7 | high nibbles of mn4..7
inline void unpack_q4k_scales(const uint8_t* s, uint8_t sc[8], uint8_t mn[8]) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  const uint32_t lo6 = 0x3f3f3f3fu, lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
  const uint32_t sc_w[2] = {u[0] & lo6, (u[2] & lo4) | (((u[0] >> 6) & lo2) << 4)};
  const uint32_t mn_w[2] = {u[1] & lo6, ((u[2] >> 4) & lo4) | (((u[1] >> 6) & lo2) << 4)};
  std::memcpy(sc, sc_w, 8);
  std::memcpy(mn, mn_w, 8);
}

// IQ4_XS: the 8 signed sub-block scales ls = (low4 | high2 << 4) - 32.
inline void unpack_iq4xs_scales(const block_iq4_xs& b, int ls[8]) {
  for (int ib = 0; ib < 8; ++ib)
    ls[ib] = (((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

// The IQ4_NL/IQ4_XS grid as a 16-byte table for byte-shuffle lookups (pshufb, tbl).
alignas(16) inline constexpr int8_t kIQ4NLTable[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                       1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace gaacrt::cpu
