// xq_order.h — the order of quantized activations in the decode matvecs' scratch (matvec_q8.cuh
// Q8Act): no CUDA headers, so the host tests check it (tests/cpp/test_matvec_pieces.cpp).
#pragma once
#include <cstdint>

namespace gaacrt::cuda {

// Where column col of an n_cols row of quantized x lies in the decode matvecs' order
// (XOrder::Lanes): each run of 32 blocks of 32 values (1,024 columns; the row's last run may be
// shorter, m blocks) holds the first 16 values of each block, then the last 16 of each. A warp's
// lanes take consecutive blocks (kernels/matvec_pieces.cuh), so each 16-byte load of x by the
// warp reads one contiguous span: in row order, lane i's loads at 32 i and 32 i + 16 used half of
// every 32-byte sector they touched, twice the L1 traffic (Nsight Compute on the 8B shape's
// down projection, H100: 19.2 of 32 bytes used per sector). Every 16-column granule stays
// contiguous, so loads of up to 16 bytes inside one keep working unchanged.
// (I: int in the matvecs' loops, int64_t in the quantize kernels.)
template <typename I>
__host__ __device__ inline I xq_pos(I col, I n_cols) {
  const I c0 = col & ~I{1023};
  const I m = n_cols - c0 >= 1024 ? 32 : (n_cols - c0) / 32;  // blocks in col's run
  return c0 + ((col >> 4) & 1) * 16 * m + ((col >> 5) & 31) * 16 + (col & 15);
}
// The two orders of quantized x: Lanes (xq_pos) for the decode matvecs, Rows (plain row-major)
// for the prefill matmul's 8-bit path (matmul_q8mma.cu), which reads tiles of whole rows.
enum class XOrder { Lanes, Rows };

// Where the W int8x4 words of x a piece P's group meets (columns col + P::off(i) of a row of n_cols
// in XOrder::Lanes) start: one or two runs, each inside one 16-column granule, so contiguous
// there too — 32 columns as two runs of 16 (regrouped Q4_0), 16 (Q8_0, K-quants' groups start on
// 16-byte columns), two runs of 8 (nibble types: 0-7 and 16-23, from an 8-byte column), or one
// run of 8 (Q6_K). matvec_rows.cuh load_x reads them; the host test checks every piece against
// word_at.
template <typename P>
struct XRuns {
  static constexpr int kN = P::W == 8 || (P::W == 4 && P::off(3) != 12) ? 2 : 1;
  static constexpr int kWords = P::W / kN;  // words per run
  int at[kN];
  __host__ __device__ XRuns(int col, int n_cols) {
    at[0] = xq_pos(col, n_cols);
    if constexpr (kN == 2) at[1] = xq_pos(col + P::off(kWords), n_cols);
  }
  // Where word i starts.
  __host__ __device__ int word_at(int i) const { return at[i / kWords] + 4 * (i % kWords); }
};

}  // namespace gaacrt::cuda
