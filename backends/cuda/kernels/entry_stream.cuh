// entry_stream.cuh — the block-table entries of a warp's stream of blocks, fetched 32 blocks at a
// time, one batch ahead, and the cp.async pipeline they feed (the attention kernels of
// attention_mma.cuh, attention_e8_mma.cuh and attention_lossy.cuh).
//
// Why: a tile's entry is a load in front of the copy it addresses. Loaded when the copy is issued,
// or even one block earlier, it stalled the warp on every block (ncu, BF16 kernel at 64K: ~45% of
// the stall samples on the first use of the entry): the load queues behind the warp's cp.async
// traffic already in flight, so it returns only after those blocks have landed. Here lane j holds
// the entries of the warp's iteration 32 k + j for the current batch k and the next, the next
// batch is requested when the current one starts (32 iterations before it is needed), and an
// iteration's entries are read out with one shuffle each.
#pragma once
#include <cstdint>

#include "kv/kv_view.h"

namespace gaacrt::cuda {

// kT tiles per block: entry of tile t (K halves, then V halves) of block b at row0[t * stride + b].
template <int kT>
struct EntryStream {
  const uint32_t* row0;
  int32_t stride, b_first, b_step, n_iter, n_fill;
  uint32_t cur[kT], nxt[kT];

  __device__ __forceinline__ void load(int32_t batch, uint32_t (&dst)[kT]) const {
    const int32_t i = 32 * batch + (int32_t)(threadIdx.x & 31);
    const bool ok = i < n_iter;
    const int32_t b = b_first + (ok ? i : 0) * b_step;
#pragma unroll
    for (int t = 0; t < kT; ++t) dst[t] = ok ? __ldg(row0 + (int64_t)t * stride + b) : KV_ENTRY_EMPTY;
  }

  // The stream of blocks b_first, b_first + b_step, ... (n_iter of them) of kv-head kvh; issues
  // run to iteration fill - 1 (at least n - 1), those past the stream with released entries
  // (KV_ENTRY_EMPTY: the copies zero-fill; a wgmma step padded to its constant size).
  __device__ __forceinline__ void start(const KVLayerView& kv, const uint32_t* table, int32_t kvh, int32_t first,
                                        int32_t step, int32_t n, int32_t fill = 0) {
    row0 = table + kv_entry_index(kv, kvh, 0, 0, 0);
    stride = kv.max_blocks;
    b_first = first;
    b_step = step;
    n_iter = n;
    n_fill = max(n, fill);
    load(0, cur);
    load(1, nxt);
  }

  // Entries of iteration it; calls must come in order it = 0, 1, 2, ... (warp-uniform).
  __device__ __forceinline__ void get(int32_t it, uint32_t (&e)[kT]) {
    if ((it & 31) == 0 && it > 0) {
#pragma unroll
      for (int t = 0; t < kT; ++t) cur[t] = nxt[t];
      load((it >> 5) + 1, nxt);
    }
#pragma unroll
    for (int t = 0; t < kT; ++t) e[t] = __shfl_sync(0xFFFFFFFFu, cur[t], it & 31);
  }

  // A warp's pipeline of kS stages: block i is issued kS - 1 iterations before its turn, by
  // issue(i, entries), which starts its copies. Each call commits one cp.async group, whether it
  // issued or not, so that cp.async.wait_group counts stay in step with the iterations.
  template <int kS, typename Issue>
  __device__ __forceinline__ void issue_first(Issue&& issue) {  // blocks 0 .. kS - 2
#pragma unroll
    for (int p = 0; p < kS - 1; ++p) {
      if (p < n_fill) {
        uint32_t e[kT];
        get(p, e);
        issue(p, e);
      }
      commit_group();
    }
  }
  // issue_first with the wait for the previous kernel (PDL) inside it: blocks 0 .. n_pre - 1 are
  // issued before wait() (they must not depend on that kernel), the rest after. wait() runs once.
  template <int kS, typename Issue, typename Wait>
  __device__ __forceinline__ void issue_first(Issue&& issue, int32_t n_pre, Wait&& wait) {
#pragma unroll
    for (int p = 0; p < kS - 1; ++p) {
      if (p == n_pre) wait();
      if (p < n_fill) {
        uint32_t e[kT];
        get(p, e);
        issue(p, e);
      }
      commit_group();
    }
    if (n_pre >= kS - 1) wait();
  }
  template <int kS, typename Issue>
  __device__ __forceinline__ void issue_ahead(int32_t it, Issue&& issue) {  // at iteration it: it + kS - 1
    const int32_t nx = it + kS - 1;
    if (nx < n_fill) {
      uint32_t e[kT];
      get(nx, e);
      issue(nx, e);
    }
    commit_group();
  }
  // issue_ahead for iterations it .. it + kN - 1 (it and kS - 1 multiples of kN): the blocks'
  // entries are all read out first, so that their shuffles' latencies overlap. (One block after
  // the other, the wgmma prefill had ~10% of its stall samples on the first use of a shuffled
  // entry; with this and one address per page those moved to the step's next instructions and
  // pp512 after 32K stayed where it was, 4,284-4,293 tok/s on an H100, the eighteenth session.)
  // Past the stream's end get() reads released entries.
  template <int kS, int kN, typename Issue>
  __device__ __forceinline__ void issue_ahead_group(int32_t it, Issue&& issue) {
    static_assert((kS - 1) % kN == 0, "groups start on multiples of kN");
    const int32_t nx = it + kS - 1;
    uint32_t e[kN][kT];
#pragma unroll
    for (int j = 0; j < kN; ++j) get(nx + j, e[j]);
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      if (nx + j < n_fill) issue(nx + j, e[j]);
      commit_group();
    }
  }
  __device__ __forceinline__ static void commit_group() {
#if defined(GAACRT_CUDA_EMULATION)
    gaacrt_cuda_emu::cp_async_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
  }
};

}  // namespace gaacrt::cuda
