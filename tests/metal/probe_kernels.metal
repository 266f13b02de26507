// probe_kernels.metal — small kernels that pin down the MSL emulation's semantics (run by
// emulation_probe.cpp through tests/test_metal_emulation.py): SIMD functions, inactive lanes,
// barriers, the exposure of a missing barrier, and the errors a GPU would hang or misbehave on.
#include "metal/kernels/common.h"

namespace probe {

struct Args {
  uint32_t n;
};

// out(threads, 8): simd_sum, simd_max, simd_min, shuffle_xor 5, shuffle_down 3, prefix sum of 1,
// broadcast of lane 7, shuffle from lane 31 - lane.
template <typename T>
kernel void simd_ops(constant Args& a [[buffer(0)]], device T* out [[buffer(1)]], GAACRT_POSITIONS) {
  const float v = (float)tiisg + 0.5f * (float)sgitg;
  device T* o = out + tiitg * 8;
  o[0] = simd_sum(v);
  o[1] = simd_max(v);
  o[2] = simd_min(v);
  o[3] = simd_shuffle_xor(v, (ushort)5);
  o[4] = simd_shuffle_down(v, (ushort)3);
  o[5] = (T)simd_prefix_exclusive_sum(1u);
  o[6] = simd_broadcast(v, (ushort)7);
  o[7] = simd_shuffle(v, (ushort)(31 - tiisg));
}

// Lanes >= a.n return first; the rest add 1 over the SIMD group: inactive lanes add nothing.
template <typename T>
kernel void sum_after_exit(constant Args& a [[buffer(0)]], device T* out [[buffer(1)]], GAACRT_POSITIONS) {
  if (tiisg >= a.n) return;
  out[tiitg] = simd_sum((T)1);
}

// Each thread writes its slot, then reads its neighbour's: with the barrier (a.n = 1) always right;
// without it the emulation runs lanes in alternating orders, so some read a slot not yet written.
template <typename T>
kernel void neighbour(constant Args& a [[buffer(0)]], device T* out [[buffer(1)]], threadgroup T* tg GAACRT_TG_MEM(0),
                      GAACRT_POSITIONS) {
  const uint n = 64;
  tg[tiitg] = (T)tiitg;
  if (a.n) threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tiitg] = tg[(tiitg + 1) % n];
}

// Threadgroup memory never written reads as the NaN pattern, not as zeros.
template <typename T>
kernel void uninit(constant Args& a [[buffer(0)]], device T* out [[buffer(1)]], threadgroup T* tg GAACRT_TG_MEM(0),
                   GAACRT_POSITIONS) {
  out[tiitg] = tg[tiitg];
}

// A barrier only the first SIMD group reaches (a GPU hangs or misbehaves): an error.
template <typename T>
kernel void divergent_barrier(constant Args& a [[buffer(0)]], device T* out [[buffer(1)]], GAACRT_POSITIONS) {
  if (sgitg == 0) threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tiitg] = 1;
}

// A SIMD function only half the lanes call, the others running to the end: as on the GPU the sum
// covers the active half (the others have left by the time the call completes).
template <typename T>
kernel void half_simd(constant Args& a [[buffer(0)]], device T* out [[buffer(1)]], GAACRT_POSITIONS) {
  T v = 0;
  if (tiisg < 16) v = simd_sum((T)1);
  out[tiitg] = v;
}

// Lanes of one SIMD group at two different simd_sum call sites.
template <typename T>
kernel void two_sites(constant Args& a [[buffer(0)]], device T* out [[buffer(1)]], GAACRT_POSITIONS) {
  T v;
  if (tiisg < 16) v = simd_sum((T)1);
  else v = simd_sum((T)2);
  out[tiitg] = v;
}

}  // namespace probe

GAACRT_KERNEL("simd_ops", probe::simd_ops<float>)
GAACRT_KERNEL("sum_after_exit", probe::sum_after_exit<float>)
GAACRT_KERNEL("neighbour", probe::neighbour<float>)
GAACRT_KERNEL("uninit", probe::uninit<float>)
GAACRT_KERNEL("divergent_barrier", probe::divergent_barrier<float>)
GAACRT_KERNEL("half_simd", probe::half_simd<float>)
GAACRT_KERNEL("two_sites", probe::two_sites<float>)
