// msl_shim.h — the subset of the Metal Shading Language the kernels in ../kernels use, as C++, so
// that the same .metal sources compile and run on the CPU (DESIGN.md "Backends", issue 8).
//
// Two modes:
//   run (default):  the library build compiles the .metal files as C++17 with this shim; SIMD
//                   functions and barriers go to the fiber scheduler in runtime.h.
//   strict (GAACRT_MSL_STRICT, clang, syntax only): C++14, -fno-exceptions -fno-rtti, no system
//                   header at all (so nothing of std:: exists), `double`, `new`, `std` and friends
//                   poisoned, and the address spaces are distinct clang address spaces, so passing a
//                   device pointer where a thread one is expected, or declaring threadgroup memory
//                   in a kernel body, fails to compile as it would (or should) in MSL.
// Minimal on purpose: only what the kernels use exists, so a kernel cannot lean on a feature the
// emulation fakes — anything else is an undeclared identifier.
//
// Differences from MSL that the kernels are written around (kernels/common.h):
//   - `[[threadgroup(n)]]` is spelled GAACRT_TG_MEM(n): the emulation's `threadgroup` is a macro,
//     which the preprocessor would also substitute inside the attribute;
//   - every kernel ends with the same four position parameters (the thunk binds them by place).
#pragma once

#if !defined(__METAL_VERSION__)
  #error "msl_shim.h emulates MSL: compile with -D__METAL_VERSION__=300 -DGAACRT_MSL_EMULATION"
#endif

#if !defined(GAACRT_MSL_STRICT)
  #include <stddef.h>
  #include <stdint.h>
  #include "runtime.h"
#else
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __SIZE_TYPE__ size_t;
namespace msl_emu {
// Declared only: strict mode is a compile check, nothing is linked or run.
struct SimdSlot { uint64_t in, arg, out; };
typedef const char* (*SimdResolve)(SimdSlot*, const bool*, uint32_t);
uint64_t simd_sync(SimdResolve op, uint64_t in, uint64_t arg, const char* file, int line);
void threadgroup_barrier_sync(const char* file, int line);
void simdgroup_barrier_sync(const char* file, int line);
}  // namespace msl_emu
#endif

// ---- address spaces and function qualifiers ------------------------------------------------------
#if defined(GAACRT_MSL_STRICT)
  #define device __attribute__((address_space(1)))
  #define constant __attribute__((address_space(2))) const
  #define threadgroup __attribute__((address_space(3)))
#else
  #define device
  #define constant const
  #define threadgroup
#endif
#define thread
#define kernel

namespace metal {

typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;

// The position vector of [[threadgroup_position_in_grid]]: only .x .y .z are used.
struct uint3 {
  uint x, y, z;
};

// ---- bit casts and integer functions --------------------------------------------------------------
template <typename T, typename U>
inline T as_type(U u) {
  static_assert(sizeof(T) == sizeof(U), "as_type needs types of one size");
  T t;
  __builtin_memcpy(&t, &u, sizeof t);
  return t;
}
inline uint popcount(uint x) { return (uint)__builtin_popcount(x); }
inline uint clz(uint x) { return x ? (uint)__builtin_clz(x) : 32u; }

// ---- float math (metal::, metal::precise:: and metal::fast:: spell the same functions here) -----
inline float exp(float x) { return __builtin_expf(x); }
inline float log(float x) { return __builtin_logf(x); }
inline float sqrt(float x) { return __builtin_sqrtf(x); }
inline float rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }
inline float tanh(float x) { return __builtin_tanhf(x); }
inline float cos(float x) { return __builtin_cosf(x); }
inline float sin(float x) { return __builtin_sinf(x); }
inline float pow(float x, float y) { return __builtin_powf(x, y); }
inline float floor(float x) { return __builtin_floorf(x); }
inline float ceil(float x) { return __builtin_ceilf(x); }
inline float rint(float x) { return __builtin_rintf(x); }
inline float fabs(float x) { return __builtin_fabsf(x); }
inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline float max(float a, float b) { return __builtin_fmaxf(a, b); }
inline float min(float a, float b) { return __builtin_fminf(a, b); }
inline int max(int a, int b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline uint max(uint a, uint b) { return a > b ? a : b; }
inline uint min(uint a, uint b) { return a < b ? a : b; }
inline float clamp(float x, float lo, float hi) { return min(max(x, lo), hi); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isfinite(float x) { return __builtin_isfinite(x); }
namespace precise {
inline float exp(float x) { return metal::exp(x); }
inline float log(float x) { return metal::log(x); }
inline float sqrt(float x) { return metal::sqrt(x); }
inline float tanh(float x) { return metal::tanh(x); }
inline float cos(float x) { return metal::cos(x); }
inline float sin(float x) { return metal::sin(x); }
inline float pow(float x, float y) { return metal::pow(x, y); }
inline float divide(float x, float y) { return x / y; }
}  // namespace precise

// ---- synchronisation ----------------------------------------------------------------------------------
enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
inline mem_flags operator|(mem_flags a, mem_flags b) { return (mem_flags)((int)a | (int)b); }

inline void threadgroup_barrier(mem_flags, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  msl_emu::threadgroup_barrier_sync(file, line);
}
inline void simdgroup_barrier(mem_flags, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  msl_emu::simdgroup_barrier_sync(file, line);
}

}  // namespace metal

// ---- SIMD-group functions: each lane's operand travels as 64 raw bits to the scheduler, which
// computes every lane's result at once when the whole SIMD group has arrived. -----------------------
namespace msl_emu {

template <typename T>
inline uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8, "SIMD operand wider than 64 bits");
  uint64_t b = 0;
  __builtin_memcpy(&b, &v, sizeof v);
  return b;
}
template <typename T>
inline T from_bits(uint64_t b) {
  T v;
  __builtin_memcpy(&v, &b, sizeof v);
  return v;
}

// Reductions combine the active lanes as a butterfly over lane distance 16, 8, 4, 2, 1 (the usual
// hardware tree; every lane ends with the same value). Inactive lanes hold the identity.
template <typename T, int Op>  // Op: 0 sum, 1 max, 2 min
inline const char* resolve_reduce(SimdSlot* s, const bool* active, uint32_t n) {
  uint32_t a = 0;  // an active lane: its value is the identity for max and min
  while (a < n && !active[a]) ++a;
  T v[32];
  for (uint32_t i = 0; i < 32; ++i) {
    const bool on = i < n && active[i];
    v[i] = on ? from_bits<T>(s[i].in) : (Op == 0 ? T(0) : from_bits<T>(s[a].in));
  }
  for (uint32_t d = 16; d >= 1; d /= 2) {
    T w[32];
    for (uint32_t i = 0; i < 32; ++i) {
      const T x = v[i], y = v[i ^ d];
      w[i] = Op == 0 ? (T)(x + y) : Op == 1 ? (x > y ? x : y) : (x < y ? x : y);
    }
    for (uint32_t i = 0; i < 32; ++i) v[i] = w[i];
  }
  for (uint32_t i = 0; i < n; ++i) s[i].out = to_bits(v[i]);
  return nullptr;
}

// Lane i receives the operand of lane src(i) (Kind: 0 index, 1 xor mask, 2 down by delta,
// 3 up by delta); for down/up a source outside the SIMD group leaves the lane's own value.
template <int Kind>
inline const char* resolve_shuffle(SimdSlot* s, const bool* active, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    if (!active[i]) continue;
    const uint32_t a = (uint32_t)s[i].arg;
    uint32_t src = Kind == 0 ? a : Kind == 1 ? (i ^ a) : Kind == 2 ? i + a : i - a;
    if ((Kind == 2 && src >= n) || (Kind == 3 && a > i)) src = i;
    if (src >= n) return "shuffle source lane out of range";
    if (!active[src]) return "shuffle reads a lane that has returned";
    s[i].out = s[src].in;
  }
  return nullptr;
}

template <typename T, bool Inclusive>
inline const char* resolve_prefix_sum(SimdSlot* s, const bool* active, uint32_t n) {
  T acc = T(0);
  for (uint32_t i = 0; i < n; ++i) {
    if (!active[i]) continue;
    const T v = from_bits<T>(s[i].in);
    if (Inclusive) acc = (T)(acc + v);
    s[i].out = to_bits(acc);
    if (!Inclusive) acc = (T)(acc + v);
  }
  return nullptr;
}

template <typename T>
inline T simd_call(SimdResolve op, T v, uint64_t arg, const char* file, int line) {
  return from_bits<T>(simd_sync(op, to_bits(v), arg, file, line));
}

}  // namespace msl_emu

namespace metal {
#define MSL_EMU_SITE const char* file = __builtin_FILE(), int line = __builtin_LINE()
template <typename T> inline T simd_sum(T v, MSL_EMU_SITE) {
  return msl_emu::simd_call(&msl_emu::resolve_reduce<T, 0>, v, 0, file, line);
}
template <typename T> inline T simd_max(T v, MSL_EMU_SITE) {
  return msl_emu::simd_call(&msl_emu::resolve_reduce<T, 1>, v, 0, file, line);
}
template <typename T> inline T simd_min(T v, MSL_EMU_SITE) {
  return msl_emu::simd_call(&msl_emu::resolve_reduce<T, 2>, v, 0, file, line);
}
template <typename T> inline T simd_shuffle(T v, ushort lane, MSL_EMU_SITE) {
  return msl_emu::simd_call(&msl_emu::resolve_shuffle<0>, v, lane, file, line);
}
template <typename T> inline T simd_shuffle_xor(T v, ushort mask, MSL_EMU_SITE) {
  return msl_emu::simd_call(&msl_emu::resolve_shuffle<1>, v, mask, file, line);
}
template <typename T> inline T simd_shuffle_down(T v, ushort delta, MSL_EMU_SITE) {
  return msl_emu::simd_call(&msl_emu::resolve_shuffle<2>, v, delta, file, line);
}
template <typename T> inline T simd_broadcast(T v, ushort lane, MSL_EMU_SITE) {
  return msl_emu::simd_call(&msl_emu::resolve_shuffle<0>, v, lane, file, line);
}
template <typename T> inline T simd_prefix_exclusive_sum(T v, MSL_EMU_SITE) {
  return msl_emu::simd_call(&msl_emu::resolve_prefix_sum<T, false>, v, 0, file, line);
}
#undef MSL_EMU_SITE
}  // namespace metal

#define INFINITY __builtin_inff()
#define FLT_MAX __FLT_MAX__

#if !defined(GAACRT_MSL_STRICT)
  #include "launcher.h"
#else
  // Nothing past this point may use what MSL lacks.
  #pragma GCC poison double new std thread_local throw try catch virtual typeid dynamic_cast malloc printf
#endif
