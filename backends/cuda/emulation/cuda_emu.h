// cuda_emu.h — the CUDA emulation's device side: what nvcc would give a .cu file, as C++ (the
// backend "cuda-emulated"; cuda_emulation.cmake force-includes this header in every backends/cuda
// source compiled as C++).
//
// Execution model (cuda_emu.cpp): a kernel launch runs its thread blocks one after another on the
// calling OS thread; a block's threads are fibers (backends/emulation/fiber.h) scheduled between
// synchronisation points. What the GPU guarantees, the emulation keeps, and where the GPU leaves
// things undefined the emulation picks the answer most likely to expose a bug:
//   - warp collectives (__shfl*_sync, __ballot_sync, __any_sync, __syncwarp, ldmatrix, mma.sync)
//     meet every live lane of their mask at the same call; a lane of the mask waiting elsewhere
//     once nothing else can move is reported with both source lines (a divergent collective), and
//     a shuffle from a lane outside the mask is an error;
//   - __syncthreads releases when every live thread of the block has arrived;
//   - between synchronisation points threads run one after another, alternately in ascending and
//     descending order, so a read of shared memory that lacks its barrier sees the wrong value in
//     one of the two orders;
//   - cp.async copies land at the cp.async.wait_group that covers them, not before, and bulk
//     copies (cp.async.bulk) when a thread waits on their mbarrier: data read before its wait is
//     stale; dynamic shared memory starts as 0xFF bytes (a NaN pattern) in every block;
//   - mma.sync multiplies exactly and accumulates in double, rounding once per output element (the
//     tensor cores' own order is unspecified; tests compare against the CPU within tolerances and
//     bit for bit only between two runs of the same emulated kernels); ex2.approx is exp2f;
//   - wgmma (kernels/wgmma.cuh) runs as each warp's mma.sync over its rows, B read from shared
//     memory at the descriptor's layout, at once: a missing wgmma.wait_group goes unseen.
// Not modelled: timing, concurrency between blocks or kernels (launches run in stream order, so
// programmatic dependent launch has nothing to overlap), registers and occupancy.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#define GAACRT_CUDA_EMULATION 1

// ---- keywords -------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// A block's static shared variables: one per OS thread, and a block's threads are fibers of one
// OS thread that runs one block at a time.
#define __shared__ static thread_local

// ---- vector types ---------------------------------------------------------------------------------
struct uint3 { unsigned x, y, z; };
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(8) int2 { int x, y; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
inline int2 make_int2(int x, int y) { return {x, y}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

namespace gaacrt_cuda_emu {

template <typename To, typename From>
inline To bits(const From& f) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To t;
  std::memcpy(&t, &f, sizeof t);
  return t;
}

// ---- the running thread -----------------------------------------------------------------------------
struct ThreadState;
ThreadState& cur(const char* what = "a device function");
uint8_t* dynamic_smem();
unsigned lane_id();

// ---- warp collectives -----------------------------------------------------------------------------
// One lane's operands and results; `resolve` computes every participating lane's `out` from all
// of their `in` / `ptr` (participants: bit i of `mask`). Returns nullptr or an error message.
struct Slot {
  uint32_t in[12];
  uint32_t out[4];
  const void* ptr;
};
using Resolve = const char* (*)(Slot* slots, uint32_t mask);
// Blocks the calling lane until every live lane of `mask` has reached the same call.
void warp_collective(Resolve op, uint32_t mask, Slot& s, const char* file, int line);
void block_barrier(const char* file, int line);
int block_barrier_reduce(int pred, int kind, const char* file, int line);  // kind 1: or, 2: and, 3: count
void yield_spin(const char* file, int line);  // a spin-wait's try that failed: let the others run

enum class Shfl { Idx, Xor, Up, Down };
uint64_t shuffle(uint32_t mask, uint64_t v, int arg, int width, Shfl kind, const char* file, int line);

// ---- PTX pieces the kernels use through their wrappers (attention_ptx.cuh and others) -------------
void cp_async(void* dst, const void* src, uint32_t bytes, uint32_t src_bytes);
void cp_async_commit();
void cp_async_wait(int n);
void mbar_init(uint64_t* bar, uint32_t count);
void mbar_inval(uint64_t* bar);
void mbar_expect_tx(uint64_t* bar, uint32_t bytes);
void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar);
void mbar_wait(uint64_t* bar, uint32_t parity, const char* file, int line);
void ldmatrix_x4(uint32_t r[4], const void* p, bool trans, const char* file, int line);
uint32_t movmatrix_trans(uint32_t x, const char* file, int line);
void mma_bf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1, bool fp16, const char* file, int line);
// int8 mma: k 32 (a[4], b0, b1) or 16 (a[0], a[1], b0); b_unsigned: B is u8.
void mma_s8(int d[4], const uint32_t* a, uint32_t b0, uint32_t b1, int k, bool b_unsigned, const char* file, int line);
uint64_t globaltimer_ns();

}  // namespace gaacrt_cuda_emu

// The built-in positions: set by the scheduler before it resumes a thread (a block's threads are
// fibers of one OS thread, so the OS thread's copy is the running thread's).
extern thread_local uint3 threadIdx, blockIdx;
extern thread_local dim3 blockDim, gridDim;
// `extern __shared__ uint8_t name[]` is spelled GAACRT_DYNAMIC_SMEM(name) (cuda_common.h).
#define GAACRT_EMU_DYNAMIC_SMEM(name) uint8_t* const name = ::gaacrt_cuda_emu::dynamic_smem()

// ---- synchronisation and warp functions -------------------------------------------------------------
#define GAACRT_EMU_SITE const char *file_ = __builtin_FILE(), int line_ = __builtin_LINE()
inline void __syncthreads(GAACRT_EMU_SITE) { gaacrt_cuda_emu::block_barrier(file_, line_); }
inline int __syncthreads_or(int p, GAACRT_EMU_SITE) { return gaacrt_cuda_emu::block_barrier_reduce(p, 1, file_, line_); }
inline int __syncthreads_and(int p, GAACRT_EMU_SITE) { return gaacrt_cuda_emu::block_barrier_reduce(p, 2, file_, line_); }
inline int __syncthreads_count(int p, GAACRT_EMU_SITE) { return gaacrt_cuda_emu::block_barrier_reduce(p, 3, file_, line_); }
void __syncwarp(unsigned mask = 0xFFFFFFFFu, GAACRT_EMU_SITE);
unsigned __ballot_sync(unsigned mask, int pred, GAACRT_EMU_SITE);
inline int __any_sync(unsigned mask, int pred, GAACRT_EMU_SITE) { return __ballot_sync(mask, pred, file_, line_) != 0u; }
inline int __all_sync(unsigned mask, int pred, GAACRT_EMU_SITE) {
  return __ballot_sync(mask, pred, file_, line_) == __ballot_sync(mask, 1, file_, line_);
}

namespace gaacrt_cuda_emu {
template <typename T>
inline T shfl_as(uint32_t mask, T v, int arg, int width, Shfl kind, const char* file, int line) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "a shuffle moves at most 8 bytes");
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  u = shuffle(mask, u, arg, width, kind, file, line);
  T r;
  std::memcpy(&r, &u, sizeof(T));
  return r;
}
}  // namespace gaacrt_cuda_emu
template <typename T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32, GAACRT_EMU_SITE) {
  return gaacrt_cuda_emu::shfl_as(mask, v, src, width, gaacrt_cuda_emu::Shfl::Idx, file_, line_);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32, GAACRT_EMU_SITE) {
  return gaacrt_cuda_emu::shfl_as(mask, v, lane_mask, width, gaacrt_cuda_emu::Shfl::Xor, file_, line_);
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32, GAACRT_EMU_SITE) {
  return gaacrt_cuda_emu::shfl_as(mask, v, (int)delta, width, gaacrt_cuda_emu::Shfl::Up, file_, line_);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32, GAACRT_EMU_SITE) {
  return gaacrt_cuda_emu::shfl_as(mask, v, (int)delta, width, gaacrt_cuda_emu::Shfl::Down, file_, line_);
}

// Blocks run concurrently on worker OS threads (cuda_emu.cpp): atomics and fences are real ones.
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <typename T>
inline T atomicAdd(T* p, T v) {
  if constexpr (std::is_integral<T>::value) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
  } else {
    T old = *p, sum;
    do {
      sum = old + v;
    } while (!__atomic_compare_exchange(p, &old, &sum, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    return old;
  }
}
template <typename T>
inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
template <typename T>
inline T atomicMin(T* p, T v) {
  T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
template <typename T>
inline T atomicMax(T* p, T v) {
  T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
template <typename T>
inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
template <typename T>
inline T atomicCAS(T* p, T cmp, T v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;
}

// ---- loads, bits and float intrinsics ----------------------------------------------------------------
template <typename T>
inline T __ldg(const T* p) { return *p; }
template <typename T>
inline T __ldcg(const T* p) { return *p; }
template <typename T>
inline T __ldcs(const T* p) { return *p; }
inline size_t __cvta_generic_to_shared(const void* p) { return (size_t)(uintptr_t)p; }

inline float __int_as_float(int x) { return gaacrt_cuda_emu::bits<float>(x); }
inline int __float_as_int(float x) { return gaacrt_cuda_emu::bits<int>(x); }
inline float __uint_as_float(unsigned x) { return gaacrt_cuda_emu::bits<float>(x); }
inline unsigned __float_as_uint(float x) { return gaacrt_cuda_emu::bits<unsigned>(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
// __byte_perm: selector nibbles use 3 bits (no sign replication; that is prmt.b32's).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t v = ((uint64_t)y << 32) | x;
  unsigned r = 0;
  for (int k = 0; k < 4; ++k) r |= (unsigned)((v >> (8 * ((s >> (4 * k)) & 7u))) & 0xFFu) << (8 * k);
  return r;
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned sh) {
  return (unsigned)(((((uint64_t)hi) << 32) | lo) >> (sh & 31u));
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned sh) {
  return (unsigned)((((((uint64_t)hi) << 32) | lo) << (sh & 31u)) >> 32);
}
inline int __dp4a(int a, int b, int c) {
  for (int k = 0; k < 4; ++k) c += (int)(int8_t)(a >> (8 * k)) * (int)(int8_t)(b >> (8 * k));
  return c;
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  for (int k = 0; k < 4; ++k) c += ((a >> (8 * k)) & 0xFFu) * ((b >> (8 * k)) & 0xFFu);
  return c;
}
inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.f / a; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline int __float2int_rn(float x) { return (int)std::nearbyint(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }

// CUDA's global min and max (integer overloads included) and the classification functions.
template <typename A, typename B>
inline std::common_type_t<A, B> min(A a, B b) {
  return b < a ? (std::common_type_t<A, B>)b : (std::common_type_t<A, B>)a;
}
template <typename A, typename B>
inline std::common_type_t<A, B> max(A a, B b) {
  return a < b ? (std::common_type_t<A, B>)b : (std::common_type_t<A, B>)a;
}
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
using std::isfinite;
using std::isinf;
using std::isnan;
