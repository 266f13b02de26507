// cuda_common.h — error checking and launch-size helpers shared by the CUDA backend's launchers.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "common/error.h"

namespace gaacrt::cuda {

// Throws Error("backend", "cuda_error") naming the failing call and CUDA's message.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error("backend", e == cudaErrorMemoryAllocation ? "out_of_memory" : "cuda_error",
                strfmt("cuda: %s: %s", what, cudaGetErrorString(e)));
}

#define GAACRT_CUDA_CHECK(call) ::gaacrt::cuda::check((call), #call)

constexpr int kWarpSize = 32;

// The backend's registered name: the same sources compiled as C++ under the CUDA emulation
// (emulation/cuda_emu.h, cuda_emulation.cmake) are the backend "cuda-emulated".
#if defined(GAACRT_CUDA_EMULATION)
constexpr const char* kBackendName = "cuda-emulated";
// The kernel's dynamic shared memory as a byte array `name` (extern __shared__ under nvcc).
#define GAACRT_DYNAMIC_SMEM(name) GAACRT_EMU_DYNAMIC_SMEM(name)
#else
constexpr const char* kBackendName = "cuda";
#define GAACRT_DYNAMIC_SMEM(name) extern __shared__ __align__(16) uint8_t name[]
#endif

// Blocks of `threads` covering n items with a grid-stride loop (capped: the loop does the rest).
inline unsigned grid_for_items(int64_t n, int threads) {
  const int64_t g = (n + threads - 1) / threads;
  return static_cast<unsigned>(g < 1 ? 1 : (g > 65536 ? 65536 : g));
}

// Thread blocks along x of an attention launch: n_split (sized for decode) or, when a sequence
// may have more than decode_rows query rows (max_rows = AttentionArgs::max_q times the GQA group),
// one block per rows_per_block of them (at most 4,096; the kernels stride past that), so a long
// prompt fills the GPU. Blocks past n_split leave decode-sized sequences at once.
inline int32_t attention_grid_x(int32_t n_split, int64_t max_rows, int32_t decode_rows, int32_t rows_per_block) {
  if (max_rows <= decode_rows) return n_split;
  const int64_t blocks = (max_rows + rows_per_block - 1) / rows_per_block;
  return n_split > blocks ? n_split : (int32_t)(blocks < 4096 ? blocks : 4096);
}

// ---- programmatic dependent launch (PDL, sm_90+) ----------------------------------------------
// A decode step is ~250 small dependent kernels; between two of them the GPU normally drains
// the first grid before it launches the second. With PDL every kernel is launched with
// programmatic stream serialization and starts with pdl_begin(): it waits (griddepcontrol.wait)
// until the previous grid has completed and its writes are visible — so no kernel reads or writes
// anything earlier than before — and then lets the next grid launch (launch_dependents), so the
// next kernel's launch and scheduling overlap this one's run instead of following it. Older GPUs
// ignore both (the instructions are compiled for sm_90+ only). GAACRT_CUDA_PDL=0 turns it off.
//
// Because every kernel lets the next one launch only after its own wait, a kernel starts after
// every kernel but its immediate predecessor has completed: work that reads only what was written
// two or more kernels earlier, or before the step (positions, slots, the block table, weights),
// may run before pdl_begin() (rope_store's cos/sin and destinations, attention's first copies).
bool pdl_enabled(int device);  // cuda_backend.cu: compute capability >= 9 and not disabled

#ifdef __CUDACC__
__device__ __forceinline__ void pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" :::);
#endif
}

// Launches made inside a PdlOff scope (on this thread) go without PDL: they start once the
// previous kernel has completed, for a kernel whose reads before pdl_begin() would otherwise
// meet that kernel's writes in flight (attention_gaac_expand.cu's attention launch).
inline int& pdl_off_depth() {
  static thread_local int depth = 0;
  return depth;
}
struct PdlOff {
  PdlOff() { ++pdl_off_depth(); }
  ~PdlOff() { --pdl_off_depth(); }
  PdlOff(const PdlOff&) = delete;
  PdlOff& operator=(const PdlOff&) = delete;
};

// kernel<<<grid, block, smem, stream>>>(args...), with PDL where enabled.
template <typename... KArgs, typename... Args>
inline void launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args&&... args) {
  int device = 0;
  GAACRT_CUDA_CHECK(cudaGetDevice(&device));
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled(device) && pdl_off_depth() == 0 ? 1 : 0;
  GAACRT_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

// A device attribute, read once per device (the first 64; others every call).
template <cudaDeviceAttr kAttr>
inline int device_attr(int device) {
  static int cached[64] = {};
  if (device >= 0 && device < 64 && cached[device]) return cached[device];
  int v = 0;
  GAACRT_CUDA_CHECK(cudaDeviceGetAttribute(&v, kAttr, device));
  if (device >= 0 && device < 64) cached[device] = v;
  return v;
}
// The most dynamic shared memory a thread block of `device` may opt in to.
inline int max_dynamic_smem(int device) { return device_attr<cudaDevAttrMaxSharedMemoryPerBlockOptin>(device); }

// Lets Kernel use `bytes` of dynamic shared memory (above the default 48 KB takes an opt-in),
// once per device: a kernel whose need is fixed.
template <auto Kernel>
inline void allow_dynamic_smem(size_t bytes) {
  static bool raised[64] = {};
  int device = 0;
  GAACRT_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= 0 && device < 64 && raised[device]) return;
  GAACRT_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  if (device >= 0 && device < 64) raised[device] = true;
}

__device__ __forceinline__ float warp_sum_f32(float v) {
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum_f64(double v) {
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ int warp_sum_i32(int v) {
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max_f32(float v) {
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

#endif

}  // namespace gaacrt::cuda
