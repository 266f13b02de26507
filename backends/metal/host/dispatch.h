// dispatch.h — one kernel dispatch as the portable host describes it, before any Metal object
// exists: which kernel (by host name), the grid, and what goes in each [[buffer(i)]] and
// [[threadgroup(i)]] slot. The Objective-C++ layer (metal_device.mm) turns it into
// setBuffer/setBytes/setThreadgroupMemoryLength/dispatchThreadgroups calls; the emulation
// (metal_emulated.cpp) into a msl_emu::Launch. Everything that decides the numbers lives in the
// planner (metal_plan.h) and is tested on Linux.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace gaacrt::mtl {

// A buffer argument: either memory the backend can address (an allocation of this backend or a
// mapped weight; `ptr` + `bytes` to be resolved into a buffer and offset), or bytes the host
// staged at planning time (argument structs, block tables, work lists), copied when the dispatch
// is encoded so that later host changes cannot reach an in-flight kernel. A staged buffer with
// `readback` set is copied back there once the dispatch has completed.
struct BufferArg {
  const void* ptr = nullptr;
  size_t bytes = 0;                 // device: bytes the kernel may touch from ptr (0: unknown)
  std::vector<uint8_t> staged;      // non-empty: a staged buffer
  void* readback = nullptr;

  static BufferArg device(const void* p, size_t n) {
    BufferArg b;
    b.ptr = p;
    b.bytes = n;
    return b;
  }
  template <typename T>
  static BufferArg stage(const T* data, size_t count, void* readback = nullptr) {
    BufferArg b;
    b.staged.resize(count * sizeof(T) == 0 ? 16 : count * sizeof(T));  // Metal refuses 0-byte buffers
    if (count) std::memcpy(b.staged.data(), data, count * sizeof(T));
    b.readback = readback;
    return b;
  }
  template <typename T>
  static BufferArg stage_one(const T& v) { return stage(&v, 1); }
  bool is_staged() const { return !staged.empty(); }
};

struct Dispatch {
  std::string kernel;                 // host name, e.g. "matvec_q4_K"
  uint32_t grid[3] = {1, 1, 1};       // threadgroups
  uint32_t threads = 32;              // threads per threadgroup
  std::vector<BufferArg> buffers;     // [[buffer(0..)]]; buffer 0 is the argument struct
  std::vector<uint32_t> tg_bytes;     // [[threadgroup(0..)]]
};

}  // namespace gaacrt::mtl
