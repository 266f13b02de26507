// test_matvec_pieces.cpp — the CUDA decode matvec's weight unpacking (backends/cuda/kernels/
// matvec_pieces.cuh) checked on the host, so CI (no GPU) runs it: for every quantized type, the
// pieces of a block cover each of its values exactly once, and their int8 dot products, scaled
// as the kernel scales them, equal the dot product of dequant_block's values with the same int8
// activations (exact in double), read where the kernel reads them in x's lane order (xq_order.h,
// checked here too); Q4_0, Q8_0 and Q6_K also in the group-of-eight layout (quant/group8.h),
// whose blocks must also read back byte for byte. The device intrinsics and types it uses get their
// documented meaning here (PTX prmt's default mode with 3-bit selectors; dp4a on signed bytes).
#include <algorithm>
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
#include "../../backends/cuda/xq_order.h"
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
    // The row's activations, and the same in the decode matvecs' order (xq_order.h), where the
    // words are read (XRuns): n_blocks * QK columns, a run of 1,024 cut short or whole.
    const int n_cols = n_blocks * QK;
    std::vector<int8_t> xrow(n_cols), xlanes(n_cols, 0), placed(n_cols, 0);
    for (auto& v : xrow) v = (int8_t)((int)(rng() % 255) - 127);
    for (int c = 0; c < n_cols; ++c) {
      const int at = gaacrt::cuda::xq_pos(c, n_cols);
      CHECK(at >= 0 && at < n_cols && placed[at]++ == 0, strfmt("%s: xq_pos(%d, %d) = %d", name, c, n_cols, at));
      xlanes[at] = xrow[c];
    }
    const int8_t* xq = xrow.data() + b * QK;  // the block's columns
    double ref = 0, got = 0;
    for (int i = 0; i < QK; ++i) ref += (double)w[i] * xq[i];
    std::vector<int> seen(QK, 0);
    for (int k = 0; k < P::kLanes; ++k) {
      const auto v = P::unpack(gaacrt::cuda::piece_load<Stored>(stored.data(), b, k), k);
      for (int g = 0; g < P::G; ++g) {
        int s = 0;
        const gaacrt::cuda::XRuns<P> runs(b * QK + v.col[g], n_cols);
        for (int i = 0; i < P::W; ++i) {
          const int c = v.col[g] + P::off(i);
          int xw, xr;
          std::memcpy(&xw, xlanes.data() + runs.word_at(i), 4);
          std::memcpy(&xr, xq + c, 4);
          CHECK(xw == xr, strfmt("%s: word %d of group %d read at %d, not column %d's", name, i, g, runs.word_at(i),
                                 b * QK + c));
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

// xq_pos is a permutation of each row, keeps 16-column granules whole, and puts the same half of
// 32 consecutive blocks (a warp's lanes, one block each) side by side, in whole runs and the
// row's last, shorter one.
TEST_CASE(cuda_matvec_pieces_x_lane_order) {
  for (int n_cols : {32, 96, 576, 1024, 1056, 1536, 4096, 14336}) {
    std::vector<int> placed(n_cols, 0);
    for (int c = 0; c < n_cols; ++c) {
      const int at = gaacrt::cuda::xq_pos(c, n_cols);
      CHECK(at >= 0 && at < n_cols && placed[at]++ == 0, strfmt("xq_pos(%d, %d) = %d", c, n_cols, at));
      CHECK(at % 16 == c % 16 && (c % 16 == 0 || at == gaacrt::cuda::xq_pos(c - 1, n_cols) + 1),
            strfmt("n_cols %d: column %d's granule is split", n_cols, c));
    }
    const int n_blocks = n_cols / 32;
    for (int b = 0; b < n_blocks; ++b) {
      const int lane = b % 32, first = b - lane, m = std::min(32, n_blocks - first);
      for (int h = 0; h < 2; ++h)
        CHECK(gaacrt::cuda::xq_pos(32 * b + 16 * h, n_cols) == 32 * first + 16 * (h * m + lane),
              strfmt("n_cols %d: block %d half %d not beside its neighbours", n_cols, b, h));
    }
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
