// portable.h — the one macro and the integer types every portable header uses.
//
// Portable headers (src/quant, src/codec/*) are included by C++, CUDA and Metal (MSL) code.
// GAACRT_DEVICE marks pointers into buffers (MSL `device`), GAACRT_THREAD pointers to locals
// (MSL `thread`); both are empty in C++ and CUDA.
// They hold only structs, constants and value-in/value-out functions; no std::, no heap, and
// no pointer without an address space the MSL side can name (GAACRT_DEVICE below).
#pragma once

#if defined(__CUDACC__)
  // Device and host: the same arithmetic on both sides of the PCIe bus.
  #define GAACRT_HD __host__ __device__ __forceinline__
  #define GAACRT_DEVICE
  #define GAACRT_THREAD
  #include <stdint.h>
#elif defined(__METAL_VERSION__)
  #define GAACRT_HD inline
  #define GAACRT_DEVICE device
  #define GAACRT_THREAD thread
  #include <metal_stdlib>
#else
  #define GAACRT_HD inline
  #define GAACRT_DEVICE
  #define GAACRT_THREAD
  #include <stdint.h>
#endif

// static_assert exists in C++11, CUDA and MSL alike; this spelling keeps the message optional.
#define GAACRT_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
