// attention_timeline.h — a diagnostic for the decode attention kernels: with
// GAACRT_CUDA_ATTN_TIMELINE=<file> set, every attention launch outside a graph capture hands its
// thread blocks a host-mapped array, thread 0 of each block writes %globaltimer (ns) at the
// points of attn::Stamp below, and the launch is waited for and appended
// to <file> as one line:
//
//   <format> <grid.x> <grid.y> <grid.z> <n_split> <stamps of block 0> <stamps of block 1> ...
//
// (blocks in linear order x + X (y + Y z), kStamps values each, 0 where a block never got there:
// an empty split stamps its start and leaves, only the last block of a kv-head merges).
// bench/cuda_attention_timeline.py reads it and prints where a launch's time goes (ramp, stream,
// arrival spread, fused reduce). Unset, the kernels get a null pointer and stamp nothing.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

namespace gaacrt::cuda {

namespace attn {
// The points a decode thread block stamps (thread 0).
enum Stamp : int {
  kStampStart = 0,    // the block's first instruction
  kStampFirst = 1,    // warp 0's first K/V block has landed (BF16/GAAC), the queries are rotated (E8)
  kStampStreamed = 2, // every warp has streamed its blocks (the block's merge begins)
  kStampArrived = 3,  // its partial is written and counted (a split of several)
  kStampMerged = 4,   // the fused reduce is written (the last block of a kv-head only)
  kStamps = 5
};

#ifdef __CUDACC__
__device__ __forceinline__ void stamp(uint64_t* t, Stamp k) {
  if (t == nullptr || threadIdx.x != 0) return;
#if defined(GAACRT_CUDA_EMULATION)
  const uint64_t ns = gaacrt_cuda_emu::globaltimer_ns();
#else
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
#endif
  t[((uint64_t)blockIdx.x + (uint64_t)gridDim.x * (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z)) * kStamps + k] = ns;
}
#endif
}  // namespace attn

// One launch's stamps: holds the process-wide buffer (a lock) from construction, when the array
// is handed out, to destruction, so that launches from several threads take turns.
class AttnTimeline {
 public:
  // n_blocks thread blocks; disabled (stamps() == nullptr) when the variable is unset or a graph
  // is being recorded (the wait in write() would break the capture).
  AttnTimeline(int64_t n_blocks, bool capturing);
  uint64_t* stamps() const { return dev_; }
  // After the launch: waits for the stream and appends the launch's line. No-op when disabled.
  void write(cudaStream_t stream, const char* format, dim3 grid, int32_t n_split);

 private:
  uint64_t* dev_ = nullptr;
  std::unique_lock<std::mutex> lock_;  // held while enabled, released on destruction
};

}  // namespace gaacrt::cuda
