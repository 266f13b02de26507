// common.h — what every Metal kernel header includes first: the MSL standard library (Apple's,
// or the emulation's stand-in under backends/metal/emulation), the bit-exactness setting, and
// the three conventions the emulation relies on.
//
// 1. Every kernel's parameters are: `constant XArgs& a [[buffer(0)]]`, then its other buffers
//    [[buffer(1..)]] in index order, then its threadgroup blocks GAACRT_TG_MEM(0..) in index order,
//    then exactly these four positions (the emulation binds arguments by place):
//      uint3 tgpig [[threadgroup_position_in_grid]], uint tiitg [[thread_index_in_threadgroup]],
//      uint sgitg [[simdgroup_index_in_threadgroup]], uint tiisg [[thread_index_in_simdgroup]]
// 2. Threadgroup memory is only ever a kernel argument (an array declared in a kernel body would
//    be one copy per lane under the emulation; strict mode rejects it).
// 3. SIMD-group functions and barriers are called in uniform control flow (all live lanes of the
//    SIMD group / threadgroup reach the same call).
#pragma once
#include "common/portable.h"  // under __METAL_VERSION__ this includes <metal_stdlib>

using namespace metal;

#if defined(__METAL_VERSION__) && !defined(GAACRT_MSL_EMULATION)
// Metal compiles with fast math by default; the host also builds with -fno-fast-math. No a*b+c is
// contracted behind our back where the CPU reference rounds twice (dequantization) or where two
// cache formats must agree bit for bit (attention): explicit fma() where an FMA is meant.
#pragma clang fp contract(off)
#endif

#if defined(GAACRT_MSL_EMULATION)
  #define GAACRT_TG_MEM(n)
#else
  #define GAACRT_TG_MEM(n) [[threadgroup(n)]]
#endif

// One kernel instance under its host name: an explicit instantiation on Metal, a registered thunk
// under the emulation; strict mode checks the instantiation without the [[host_name]] attribute
// (which only Apple's compiler accepts in that position).
#if defined(GAACRT_MSL_EMULATION) && !defined(GAACRT_MSL_STRICT)
  #define GAACRT_KERNEL(name, ...) MSL_EMU_REGISTER_KERNEL(name, __VA_ARGS__)
#elif defined(GAACRT_MSL_STRICT)
  #define GAACRT_KERNEL(name, ...) template kernel decltype(__VA_ARGS__) __VA_ARGS__;
#else
  #define GAACRT_KERNEL(name, ...) template [[host_name(name)]] kernel decltype(__VA_ARGS__) __VA_ARGS__;
#endif

#define GAACRT_POSITIONS                                                                        \
  uint3 tgpig [[threadgroup_position_in_grid]], uint tiitg [[thread_index_in_threadgroup]],    \
      uint sgitg [[simdgroup_index_in_threadgroup]], uint tiisg [[thread_index_in_simdgroup]]
