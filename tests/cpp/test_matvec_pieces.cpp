// test_matvec_pieces.cpp — the CUDA decode matvec's weight unpacking (backends/cuda/kernels/
// matvec_pieces.cuh) checked on the host, so CI (no GPU) runs it: for every quantized type, the
// pieces of a block cover each of its values exactly once, and their int8 dot products, scaled
// as the kernel scales them, equal the dot product of dequant_block's values with the same int8
// activations (exact in double); Q4_0, Q8_0 and Q6_K also in the group-of-eight layout (quant/group8.h),
// whose blocks must also read back byte for byte. The device intrinsics and types it uses get their
// documented meaning here (PTX prmt's default mode with 3-bit selectors; dp4a on signed bytes).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/dequant.h"
#include "test_harness.h"
#include "test_vec_dot_util.h"

#define __host__
#define __device__
#define __forceinline__ inline
namespace {
// PTX prmt.b32 in its default mode: selector nibble i picks byte (sel & 7) of {y, x} for result
// byte i, and its bit 3 replaces that byte by its sign bit replicated (which the kernel must mask).
inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t v = ((uint64_t)y << 32) | x;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t sel = (s >> (4 * i)) & 0xF;
    uint32_t b = (uint32_t)((v >> (8 * (sel & 7))) & 0xFF);
    if (sel & 8) b = (b & 0x80) ? 0xFF : 0x00;
    r |= b << (8 * i);
  }
  return r;
}
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) c += (int8_t)(a >> (8 * i)) * (int8_t)(b >> (8 * i));
  return c;
}
struct uint2 { uint32_t x, y; };
struct uint4 { uint32_t x, y, z, w; };
}  // namespace
#include "../../backends/cuda/kernels/matvec_pieces.cuh"
#undef __host__
#undef __device__
#undef __forceinline__

namespace {

using gaacrt::GGMLType;
using gaacrt::strfmt;

// Stored is B (the GGUF layout) or Group8<B>.
template <typename B, int QK, typename Stored = B>
void check_pieces(GGMLType t, const char* name) {
  using P = gaacrt::cuda::Piece<Stored>;
  constexpr bool kGroup8 = gaacrt::cuda::IsGroup8<Stored>::value;
  std::mt19937 rng(17 + (int)t + 100 * kGroup8);
  for (int trial = 0; trial < 64; ++trial) {
    // GGUF: the middle block of a three-block row: for 18-, 22-, 34- and 210-byte blocks it starts
    // on a 2-byte boundary only, as odd blocks do in a real row (the sanitizer checks the loads).
    // Group of eight: every slot of a two-group row in turn.
    const int n_blocks = kGroup8 ? 2 * gaacrt::kGroup8 : 3, b = kGroup8 ? trial % n_blocks : 1;
    std::vector<uint8_t> row = gaacrt::test::random_row(t, n_blocks * QK, rng), stored = row;
    if constexpr (kGroup8)
      for (int i = 0; i < n_blocks; ++i) gaacrt::group8_place_block<B>(row.data(), stored.data(), (uint32_t)i);
    B blk;
    std::memcpy(&blk, row.data() + b * sizeof(B), sizeof(B));
    const B back = gaacrt::cuda::StoredBlock<Stored>::at(stored.data(), b);
    CHECK(std::memcmp(&back, &blk, sizeof(B)) == 0, strfmt("%s: block %d does not read back", name, b));
    float w[QK];
    gaacrt::dequant_block(blk, w);
    int8_t xq[QK];
    for (auto& v : xq) v = (int8_t)((int)(rng() % 255) - 127);
    double ref = 0, got = 0;
    for (int i = 0; i < QK; ++i) ref += (double)w[i] * xq[i];
    std::vector<int> seen(QK, 0);
    for (int k = 0; k < P::kLanes; ++k) {
      const auto v = P::unpack(gaacrt::cuda::piece_load<Stored>(stored.data(), b, k), k);
      for (int g = 0; g < P::G; ++g) {
        int s = 0;
        for (int i = 0; i < P::W; ++i) {
          const int c = v.col[g] + P::off(i);
          int xw;
          std::memcpy(&xw, xq + c, 4);
          s = __dp4a((int)v.w[g][i], xw, s);
          for (int j = 0; j < 4; ++j) seen[c + j]++;
        }
        double xsum = 0;  // Σ xq over the group's 32-block (the kernel's xs with xd = 1)
        for (int i = 0; i < 32; ++i) xsum += xq[v.col[g] / 32 * 32 + i];
        got += (double)v.d[g] * s + (P::kMin ? (double)v.m[g] * xsum : 0.0);
      }
    }
    for (int i = 0; i < QK; ++i) CHECK(seen[i] == 1, strfmt("%s: value %d read %d times", name, i, seen[i]));
    // dequant_block rounds d·q (and + m) to float per value; the pieces scale the exact integer sum.
    CHECK(std::fabs(got - ref) <= 1e-5 * (1 + std::fabs(ref)), strfmt("%s: %.9g vs %.9g", name, got, ref));
  }
}

TEST_CASE(cuda_matvec_pieces_match_dequant_block) {
  check_pieces<gaacrt::block_q4_0, 32>(GGMLType::Q4_0, "q4_0");
  check_pieces<gaacrt::block_q4_1, 32>(GGMLType::Q4_1, "q4_1");
  check_pieces<gaacrt::block_q5_0, 32>(GGMLType::Q5_0, "q5_0");
  check_pieces<gaacrt::block_q5_1, 32>(GGMLType::Q5_1, "q5_1");
  check_pieces<gaacrt::block_q8_0, 32>(GGMLType::Q8_0, "q8_0");
  check_pieces<gaacrt::block_iq4_nl, 32>(GGMLType::IQ4_NL, "iq4_nl");
  check_pieces<gaacrt::block_q4_k, 256>(GGMLType::Q4_K, "q4_K");
  check_pieces<gaacrt::block_q5_k, 256>(GGMLType::Q5_K, "q5_K");
  check_pieces<gaacrt::block_q6_k, 256>(GGMLType::Q6_K, "q6_K");
  check_pieces<gaacrt::block_iq4_xs, 256>(GGMLType::IQ4_XS, "iq4_xs");
  check_pieces<gaacrt::block_q4_0, 32, gaacrt::cuda::Group8<gaacrt::block_q4_0>>(GGMLType::Q4_0, "q4_0 group8");
  check_pieces<gaacrt::block_q8_0, 32, gaacrt::cuda::Group8<gaacrt::block_q8_0>>(GGMLType::Q8_0, "q8_0 group8");
  check_pieces<gaacrt::block_q6_k, 256, gaacrt::cuda::Group8<gaacrt::block_q6_k>>(GGMLType::Q6_K, "q6_K group8");
}

}  // namespace
