// cuda_runtime.h — the CUDA emulation's stand-in for the runtime API (cuda_emu.h says what is
// emulated): the calls backends/cuda makes, on host memory. "Device" memory is host memory, a
// stream runs its work when it is enqueued (in order, on the calling thread), and a stream being
// captured records it into a graph that cudaGraphLaunch replays. Errors a kernel meets (a
// divergent collective, a deadlock, a launch past the limits) come back as cudaErrorLaunchFailure
// with the emulation's message from cudaGetErrorString.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_emu.h"

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevice = 101,
  cudaErrorNoDevice = 100,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureInvalidated = 901,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1, cudaStreamCaptureModeRelaxed = 2 };
enum cudaDeviceAttr {
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8, cudaFuncAttributePreferredSharedMemoryCarveout = 9 };
enum cudaLaunchAttributeID { cudaLaunchAttributeProgrammaticStreamSerialization = 5 };
constexpr unsigned cudaStreamDefault = 0, cudaStreamNonBlocking = 1;
constexpr unsigned cudaHostAllocDefault = 0, cudaHostAllocMapped = 2;

struct CUstream_emu;
struct CUgraph_emu;
using cudaStream_t = CUstream_emu*;
using cudaGraph_t = CUgraph_emu*;
using cudaGraphExec_t = CUgraph_emu*;

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major, minor;
  int multiProcessorCount;
  size_t sharedMemPerBlockOptin, sharedMemPerMultiprocessor;
};

union cudaLaunchAttributeValue {
  int programmaticStreamSerializationAllowed;
  char pad[64];
};
struct cudaLaunchAttribute {
  cudaLaunchAttributeID id;
  cudaLaunchAttributeValue val;
};
struct cudaLaunchConfig_t {
  dim3 gridDim, blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute* attrs;
  unsigned numAttrs;
};

cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device);
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int device);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaDeviceSynchronize();

cudaError_t cudaMalloc(void** p, size_t bytes);
template <typename T>
inline cudaError_t cudaMalloc(T** p, size_t bytes) { return cudaMalloc(reinterpret_cast<void**>(p), bytes); }
cudaError_t cudaFree(void* p);
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned flags);
template <typename T>
inline cudaError_t cudaHostAlloc(T** p, size_t bytes, unsigned flags) {
  return cudaHostAlloc(reinterpret_cast<void**>(p), bytes, flags);
}
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaHostGetDevicePointer(void** d, void* h, unsigned flags);
template <typename T>
inline cudaError_t cudaHostGetDevicePointer(T** d, void* h, unsigned flags) {
  return cudaHostGetDevicePointer(reinterpret_cast<void**>(d), h, flags);
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s = nullptr);
cudaError_t cudaMemset(void* dst, int v, size_t bytes);
cudaError_t cudaMemsetAsync(void* dst, int v, size_t bytes, cudaStream_t s = nullptr);

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t g, unsigned long long flags = 0);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e);
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s);

namespace gaacrt_cuda_emu {
cudaError_t func_attr(const void* kernel, cudaFuncAttribute attr, int value);
// Runs (or, in a capturing stream, records) `work`: a grid of `block` threads per block.
// signature: the kernel's type, for messages where it has no dynamic symbol.
cudaError_t launch(const void* kernel, const char* signature, dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                   std::function<void()> body);
}  // namespace gaacrt_cuda_emu

template <typename F>
inline cudaError_t cudaFuncSetAttribute(F* kernel, cudaFuncAttribute attr, int value) {
  return gaacrt_cuda_emu::func_attr(reinterpret_cast<const void*>(kernel), attr, value);
}

// The kernel's parameters are copied at launch, converted as a call would convert them.
template <typename... KArgs, typename... Args>
inline cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* cfg, void (*kernel)(KArgs...), Args&&... args) {
  std::tuple<std::decay_t<KArgs>...> params(std::forward<Args>(args)...);
  return gaacrt_cuda_emu::launch(reinterpret_cast<const void*>(kernel), __PRETTY_FUNCTION__, cfg->gridDim, cfg->blockDim,
                                 cfg->dynamicSmemBytes, cfg->stream,
                                 [kernel, params]() { std::apply(kernel, params); });
}
