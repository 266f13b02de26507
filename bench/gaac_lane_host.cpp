// gaac_lane_host.cpp — checks the CUDA attention kernel's per-lane GAAC decode
// (backends/cuda/kernels/gaac_lane.cuh, decode_gaac_lane) on the CPU, bit for bit, before a GPU
// visit: random tiles of every mode mix (all 3-bit, 4-bit only, raw-heavy, every exponent incl.
// 0 and 255, NaN/Inf/subnormal patterns) for tile dims 8..128 are encoded with the reference
// encoder (gaac_encode_tile) and each lane decodes its groups from the slot with the offsets the
// kernel's warp scan gives (exclusive prefix of the lanes' X bytes and R records): every value
// must be right.
//
//   g++ -std=c++17 -O1 -Isrc -Ibackends bench/gaac_lane_host.cpp -o /tmp/lane && /tmp/lane
//
// Prints "gaac lane decode: N tiles, 0 wrong" and exits 0 on success.
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/kernels/gaac_lane.cuh"

using namespace gaacrt;

int main() {
  std::mt19937 rng(7);
  int tiles = 0, wrong = 0;
  const int dims[] = {128, 64, 32, 8, 24, 96};
  // (p4, praw, pany): share of 4-bit-range, raw-range and uniformly random exponents.
  const double mixes[][3] = {{0, 0, 0}, {0.10, 0, 0}, {0.10, 0.003, 0}, {0.2, 0.02, 0.01}, {0.4, 0.2, 0.1}, {0, 0, 1}};
  for (int d : dims)
    for (const auto& mx : mixes)
      for (int rep = 0; rep < 40; ++rep) {
        std::vector<uint8_t> b3(d), b4(d);
        for (int c = 0; c < d; ++c) {
          b3[c] = (uint8_t)(rng() % 249);
          b4[c] = (uint8_t)(rng() % 241);
        }
        std::vector<uint16_t> raw(16 * d);
        std::uniform_real_distribution<double> u(0, 1);
        for (int t = 0; t < 16; ++t)
          for (int c = 0; c < d; ++c) {
            const double x = u(rng);
            uint32_t e;
            if (x < mx[2]) e = rng() % 256;
            else if (x < mx[2] + mx[1]) e = (rng() % 2) ? (rng() % 2 ? 0 : 255) : rng() % 256;
            else if (x < mx[2] + mx[1] + mx[0]) e = b4[c] + rng() % 16;
            else e = b3[c] + rng() % 8;
            raw[t * d + c] = (uint16_t)(((rng() & 1) << 15) | (e << 7) | (rng() & 0x7F));
          }
        const uint32_t cap = gaac_max_escape_bytes(d);
        std::vector<uint8_t> slot(gaac_slot_bytes(d, cap) + 64, 0xA5);
        if (gaac_encode_tile(raw.data(), d, d, b3.data(), b4.data(), cap, slot.data()) < 0) return 2;
        uint32_t n_x = 0;
        for (int l = 0; l < gaac_lanes(d); ++l)
          n_x += gaac_popc(gaac_tag_masks(gaac_lane_tags(slot.data(), d, l)).x);
        const int row = d + 8;
        std::vector<uint16_t> out(16 * row, 0xDEAD);
        uint32_t xo = 0, ro = n_x;
        for (int l = 0; l < gaac_lanes(d); ++l) {
          const uint32_t tags = gaac_lane_tags(slot.data(), d, l);
          const GaacTagMasks m = gaac_tag_masks(tags);
          const int g = l % gaac_group_cols(d);
          const GaacU32x2 w3{gaac_ld32(&b3[8 * g]), gaac_ld32(&b3[8 * g + 4])};
          const GaacU32x2 w4{gaac_ld32(&b4[8 * g]), gaac_ld32(&b4[8 * g + 4])};
          cuda::attn::decode_gaac_lane(slot.data(), d, l, tags, xo, ro, w3, w4, out.data(), row);
          xo += gaac_popc(m.x);
          ro += 4u * gaac_popc(m.raw);
        }
        ++tiles;
        for (int t = 0; t < 16; ++t)
          for (int c = 0; c < d; ++c)
            if (out[t * row + c] != raw[t * d + c]) {
              if (wrong < 10)
                std::printf("WRONG d=%d mix=%g/%g/%g token %d ch %d: got %04x, want %04x\n", d, mx[0], mx[1], mx[2],
                            t, c, out[t * row + c], raw[t * d + c]);
              ++wrong;
            }
      }
  std::printf("gaac lane decode: %d tiles, %d wrong\n", tiles, wrong);
  return wrong ? 1 : 0;
}
