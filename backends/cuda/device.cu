// device.cu — CUDA device query and the backend's registration.
#include <cuda_runtime.h>

#include "backend/devices.h"
#include "cuda_common.h"
#include "cuda_backend.h"

namespace gaacrt::cuda {
namespace {

std::vector<DeviceInfo> list_cuda() {
  std::vector<DeviceInfo> out;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return out;
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    DeviceInfo d;
    d.backend = kBackendName;
    d.index = i;
    d.name = p.name;
    d.total_memory = p.totalGlobalMem;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.multiprocessors = p.multiProcessorCount;
    out.push_back(d);
  }
  return out;
}

std::string cuda_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("no CUDA device: ") + cudaGetErrorString(e);
  }
  if (n == 0) return "no CUDA device found";
  return "";
}

// n_threads is a CPU setting; act_bits picks the int8 paths' activation precision (16 or 8).
std::unique_ptr<Backend> create_cuda(const BackendParams& p) {
  return std::make_unique<CudaBackend>(p.device, p.act_bits);
}

const BackendRegistrar kRegisterCuda{{kBackendName, &list_cuda, &cuda_reason, &create_cuda}};

}  // namespace
}  // namespace gaacrt::cuda
