// qkv_rope.cu — the attention block's input in one launch at decode: (norm and quantize x,)
// Q/K/V matvec, RoPE of q and k, and the new token's K/V into the cache's raw bf16 page — what
// matvec_q8_multi then rope_store_kernel do, with the same bits, one kernel boundary fewer per
// layer. (A decode step of a small model is latency: on SmolLM2's shape every boundary is a
// dependent wait of microseconds, rope_store's ~2-4 µs of which were the wait and its
// own memory round trips.)
//
// A warp takes one rotation pair of one head — channels (2j, 2j+1) for NORM RoPE, (j, j+d/2) for
// NeoX — as two weight rows through rows_dots (the way gate/up takes two), so the rotation needs
// no exchange between warps. V's rows go in the same pairs, unrotated. Before the wait for the
// previous kernel each warp computes its pair's cos/sin at the tokens' positions and, for a single
// token, where its K/V channels go: positions, slots and block table were written before the step.
#include <cstdlib>
#include <type_traits>

#include "block_traits.cuh"
#include "common/half.h"
#include "cuda_backend.h"
#include "cuda_common.h"
#include "kernels/matvec_rows.cuh"
#include "kernels/rope_math.cuh"
#include "matvec_q8.cuh"

namespace gaacrt::cuda {
using namespace matvec;
namespace {

struct QkvRopeArgs {
  const uint8_t* w[3];  // Q, K, V weights
  size_t stride[3];
  const float* bias[3];
  float* y[3];          // q (n_tok, n_head, d), k and v (n_tok, n_head_kv, d)
  int32_t heads[3];     // n_head, n_head_kv, n_head_kv
  unsigned first[4];    // first thread block of each matrix; first[3] = the grid
  int32_t head_dim;
  const int32_t* pos;
  const float* freq_factors;
  RopeConst rc;
  KVLayerView kv;
  const KVTokenSlot* slots;
};

template <typename Block, int QK, int T, bool kQ16, bool kNorm, int kMinBlocks = 1>
__global__ void __launch_bounds__(rows_per_block<kNorm>() * kWarpSize, kMinBlocks)
qkv_rope_kernel(QkvRopeArgs a, int64_t n_cols, int n_tok, XQ x, NormX nx) {
  constexpr int R = rows_per_block<kNorm>();
  const int i = blockIdx.x >= a.first[1] ? (blockIdx.x >= a.first[2] ? 2 : 1) : 0;  // 0 Q, 1 K, 2 V
  const int64_t pair = (int64_t)(blockIdx.x - a.first[i]) * R + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int32_t half = a.rc.half, d = a.head_dim;
  const int64_t n_pairs = (int64_t)a.heads[i] * half;
  const bool live = pair < n_pairs;
  if (!kNorm && !live) return;  // kNorm: every warp takes part in the prologue
  const int64_t p = live ? pair : n_pairs - 1;
  const int32_t h = (int32_t)(p / half), j = (int32_t)(p % half);
  int ca, cb;
  rope_channels(j, a.rc, ca, cb);

  // Before the wait: nothing here is the previous kernel's output.
  float cs[T], sn[T];
#pragma unroll
  for (int t = 0; t < T; ++t) {
    cs[t] = 1.f, sn[t] = 0.f;
    if (t < n_tok && i < 2) rope_cs(j, a.pos[t], a.freq_factors, a.rc, cs[t], sn[t]);
  }
  uint16_t* dst1[2] = {nullptr, nullptr};  // one token: its K or V channels' places
  if (T == 1 && i > 0 && live) {
    const KVTokenSlot s = a.slots[0];
    dst1[0] = bf16_dst(a.kv, s, h, i - 1, ca);
    dst1[1] = bf16_dst(a.kv, s, h, i - 1, cb);
  }

  float acc[2][T];
  const uint8_t* rows[2] = {a.w[i] + ((int64_t)h * d + ca) * a.stride[i], a.w[i] + ((int64_t)h * d + cb) * a.stride[i]};
  rows_dots<Block, QK, T, kQ16>(rows, (int)n_cols, n_tok, x, lane, acc, XPrologue<kNorm, kQ16>{x, nx, n_tok, n_cols});
  if (!live || lane != 0) return;
  const float* bias = a.bias[i];
#pragma unroll
  for (int t = 0; t < T; ++t) {
    if (t >= n_tok) break;
    // matvec_q8_multi_kernel's outputs, then rope_store_kernel's arithmetic on them.
    float ya = bias ? acc[0][t] + bias[(int64_t)h * d + ca] : acc[0][t];
    float yb = bias ? acc[1][t] + bias[(int64_t)h * d + cb] : acc[1][t];
    if (i < 2) rope_rotate(ya, yb, cs[t], sn[t]);
    float* yt = a.y[i] + ((int64_t)t * a.heads[i] + h) * d;
    yt[ca] = ya;
    yt[cb] = yb;
    if (i == 0) continue;
    uint16_t *da = dst1[0], *db = dst1[1];
    if (T != 1) {
      const KVTokenSlot s = a.slots[t];
      da = bf16_dst(a.kv, s, h, i - 1, ca);
      db = bf16_dst(a.kv, s, h, i - 1, cb);
    }
    *da = f32_to_bf16(ya);
    *db = f32_to_bf16(yb);
  }
}

}  // namespace

bool matvec_q8_qkv_rope(const WeightView* w, const float* const* bias, float* const* y, const Q8Act& a,
                        const NormX* norm, int32_t n_head, const int32_t* pos, const RopeParams& rope,
                        const KVLayerView& kv, const KVTokenSlot* slots, cudaStream_t stream) {
  const char* e = std::getenv("GAACRT_CUDA_QKV_ROPE");  // 0: the matvec and rope_store as two launches
  const bool off = e && e[0] == '0';  // read per call (host code, not in a replayed graph): tests flip it
  const int32_t d = kv.head_dim_k;
  if (off || a.n_tok < 1 || a.n_tok > kMatvecQ8MaxTokens || d % 2 || rope.n_rot != d)
    return false;
  const int32_t heads[3] = {n_head, kv.n_head_kv, kv.n_head_kv};
  for (int m = 0; m < 3; ++m)
    if (w[m].type != w[0].type || w[m].layout != w[0].layout || w[m].n_cols != a.n_cols ||
        w[m].n_rows != (int64_t)heads[m] * d || !matvec_q8_supported(w[m].type))
      return false;
  for (int m = 0; m < 3; ++m) check_q8_alignment(w[m], "matvec_q8_qkv_rope");
  norm = norm_in_launch(norm, true, a, stream);
  const int R = rows_per_block(norm != nullptr);
  QkvRopeArgs q{};
  q.first[0] = 0;
  for (int m = 0; m < 3; ++m) {
    q.w[m] = static_cast<const uint8_t*>(w[m].data);
    q.stride[m] = w[m].row_stride;
    q.bias[m] = bias ? bias[m] : nullptr;
    q.y[m] = y[m];
    q.heads[m] = heads[m];
    q.first[m + 1] = q.first[m] + (unsigned)(((int64_t)heads[m] * (d / 2) + R - 1) / R);
  }
  q.head_dim = d;
  q.pos = pos;
  q.freq_factors = rope.freq_factors;
  q.rc = rope_const(rope, d);
  q.kv = kv;
  q.slots = slots;
  // One token of regrouped Q4_0, norm outside: registers capped at 80 for six blocks per SM (48 bytes
  // of spill), so the 8B shape's 3,072 warps fit one wave (104 registers, four blocks: 1.45 waves);
  // H200, PDL off: 11.56 -> 9.00 µs a launch. GAACRT_CUDA_QKV_BLOCKS=1 (read per call: a test flips
  // it) asks the uncapped kernel.
  const char* eb = std::getenv("GAACRT_CUDA_QKV_BLOCKS");
  const bool six = !(eb && eb[0] == '1');
  launch_q8_norm_kernel(w[0], a, norm, q.first[3], q, stream, [six](auto bt, auto nt, auto bits, auto kn) {
    using BT = decltype(bt);
    constexpr int T = decltype(nt)::value;
    constexpr bool kQ16 = decltype(bits)::value, kNorm = decltype(kn)::value;
    auto kernel = qkv_rope_kernel<typename BT::block, BT::qk, T, kQ16, kNorm>;
    // Measured on regrouped Q4_0 only: capped, other types spill more (Q4_K 128 bytes, Q6_K 276).
    if constexpr (T == 1 && !kNorm && std::is_same_v<typename BT::block, Group8<block_q4_0>>)
      if (six) kernel = qkv_rope_kernel<typename BT::block, BT::qk, T, kQ16, kNorm, 6>;
    return kernel;
  });
  return true;
}

}  // namespace gaacrt::cuda
