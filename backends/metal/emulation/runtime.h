// runtime.h — the MSL emulation's execution model: kernels compiled as C++ from the very same
// .metal sources (see metal_stdlib in this folder), a registry of them by host name (what the
// Metal library's newFunctionWithName: is on a Mac), and a dispatcher that runs each threadgroup's
// lanes as fibers on one OS thread.
//
// Semantics kept from the GPU:
//   - threadgroup_barrier: every live lane of the threadgroup must reach the same barrier; a lane
//     that exits while others wait, or lanes waiting at different barriers, is an error (on a GPU a
//     hang or undefined behaviour);
//   - SIMD-group functions (simd_sum, simd_shuffle, ...): all live lanes of the 32-wide SIMD group
//     meet at the same call and each gets its result; lanes that have returned are inactive (they
//     add nothing to a reduction; reading one through a shuffle is an error). A lane-divergent SIMD
//     call (some lanes at it, others elsewhere) is an error: the kernels keep them uniform;
//   - between two synchronisation points lanes run one after another, alternately in ascending
//     and descending order, so a read of threadgroup memory that lacks its barrier sees the wrong
//     (stale or NaN-filled) value in one of the two orders and the test fails;
//   - threadgroup memory starts as 0xFF bytes (a NaN pattern), never as zeros the kernel forgot
//     to write.
// This header is plain C++ (no MSL macros) so that host code can include it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace msl_emu {

constexpr uint32_t kSimdWidth = 32;      // Apple GPUs' SIMD-group width
constexpr uint32_t kMaxThreads = 1024;   // maxTotalThreadsPerThreadgroup on Apple silicon
constexpr size_t kMaxThreadgroupBytes = 32768;  // threadgroup memory per threadgroup

struct ThreadPos {
  uint32_t tg[3];                 // [[threadgroup_position_in_grid]]
  uint32_t tiitg, sgitg, tiisg;   // [[thread_index_in_threadgroup]], [[simdgroup_index_in_threadgroup]],
                                  // [[thread_index_in_simdgroup]]
};

// One lane's operand and result of a SIMD-group function, as raw bits.
struct SimdSlot {
  uint64_t in = 0, arg = 0, out = 0;
};
// Computes `out` of every active lane of one SIMD group from their `in`/`arg`. Returns nullptr,
// or an error message (static string) such as a shuffle from an inactive lane.
using SimdResolve = const char* (*)(SimdSlot* lanes, const bool* active, uint32_t n);

// Called from kernel code (through the shim): blocks the lane until the rest of its group arrives.
uint64_t simd_sync(SimdResolve op, uint64_t in, uint64_t arg, const char* file, int line);
void threadgroup_barrier_sync(const char* file, int line);
void simdgroup_barrier_sync(const char* file, int line);

// A kernel as the emulation calls it: its buffer and threadgroup-memory arguments in parameter
// order (the buffers [[buffer(0..)]], then the threadgroup blocks [[threadgroup(0..)]]), then the
// lane's position (every kernel ends with the same four position parameters, kernels/common.h).
using KernelThunk = void (*)(void* const* args, const ThreadPos& pos);
struct KernelInfo {
  const char* name;   // the host name ([[host_name]] on Metal)
  KernelThunk thunk;
  int n_params;       // parameters of the kernel function (buffers + threadgroup + 4 positions)
};
void register_kernel(const KernelInfo& k);
const KernelInfo* find_kernel(const std::string& name);  // nullptr when none has that name
std::vector<std::string> kernel_names();

struct Launch {
  uint32_t grid[3] = {1, 1, 1};   // threadgroups per grid (dispatchThreadgroups:)
  uint32_t threads = 32;          // threads per threadgroup, a multiple of 32
  std::vector<void*> buffers;     // [[buffer(i)]]
  std::vector<size_t> tg_bytes;   // [[threadgroup(i)]] lengths (setThreadgroupMemoryLength:)
};

// Runs every threadgroup of the grid. Throws Error for a bad launch (argument count, sizes) or a
// synchronisation error in the kernel, naming the kernel, the threadgroup and the source line.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
void run_kernel(const KernelInfo& k, const Launch& l);

struct Stats {
  uint64_t dispatches = 0, threadgroups = 0, lanes = 0, switches = 0;
};
Stats stats();  // totals since the process started (this OS thread's and others')

}  // namespace msl_emu
