// cuda_backend.cu — CudaBackend memory management, scratch and the deferred kernel-error check
// (the ops live in one file each).
#include <cstdlib>

#include "cuda_backend.h"
#include "cuda_common.h"

namespace gaacrt::cuda {

bool pdl_enabled(int device) {
  static signed char cached[64];  // 0 unknown, 1 on, -1 off
  if (device < 0 || device >= 64) return false;
  if (!cached[device]) {
    const char* env = std::getenv("GAACRT_CUDA_PDL");
    int major = 0;
    GAACRT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    cached[device] = major >= 9 && !(env && env[0] == '0') ? 1 : -1;
  }
  return cached[device] > 0;
}

CudaBackend::CudaBackend(int device, int act_bits) : device_(device), q16_(act_bits == 16) {
  if (act_bits != 8 && act_bits != 16)
    throw Error("backend", "invalid_argument", strfmt("cuda: act_bits = %d; must be 8 or 16", act_bits));
  int n = 0;
  GAACRT_CUDA_CHECK(cudaGetDeviceCount(&n));
  if (device < 0 || device >= n)
    throw Error("backend", "unavailable", strfmt("cuda: device %d does not exist (%d devices)", device, n));
  GAACRT_CUDA_CHECK(cudaSetDevice(device));
  GAACRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  cudaDeviceProp p;
  GAACRT_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  info_.backend = kBackendName;
  info_.index = device;
  info_.name = p.name;
  info_.total_memory = p.totalGlobalMem;
  info_.cc_major = p.major;
  info_.cc_minor = p.minor;
  info_.multiprocessors = p.multiProcessorCount;
  void* h = nullptr;
  GAACRT_CUDA_CHECK(cudaHostAlloc(&h, sizeof(DeviceErrors), cudaHostAllocMapped));
  errors_ = static_cast<DeviceErrors*>(h);
  *errors_ = DeviceErrors{0, 0, 0, 0};
  void* d = nullptr;
  GAACRT_CUDA_CHECK(cudaHostGetDevicePointer(&d, h, 0));
  dev_errors_ = static_cast<DeviceErrors*>(d);
}

CudaBackend::~CudaBackend() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (scratch_) cudaFree(scratch_);
  if (expand_) cudaFree(expand_);
  if (attn_counters_) cudaFree(attn_counters_);
  if (errors_) cudaFreeHost(errors_);
  if (stream_) cudaStreamDestroy(stream_);
}

void* CudaBackend::alloc(size_t bytes) {
  void* p = nullptr;
  GAACRT_CUDA_CHECK(cudaSetDevice(device_));
  GAACRT_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 256 : bytes));
  return p;
}
void CudaBackend::free(void* p) {
  if (p) cudaFree(p);
}
void* CudaBackend::alloc_host(size_t bytes) {
  void* p = nullptr;
  GAACRT_CUDA_CHECK(cudaSetDevice(device_));
  GAACRT_CUDA_CHECK(cudaHostAlloc(&p, bytes == 0 ? 256 : bytes, cudaHostAllocDefault));
  return p;
}
void CudaBackend::free_host(void* p) {
  if (p) cudaFreeHost(p);
}
void CudaBackend::no_capture(const char* what) const {
  if (capturing_) throw Error("backend", "capture_failed", strfmt("cuda: %s while recording a graph", what));
}
void CudaBackend::upload(void* dst, const void* src, size_t bytes) {
  no_capture("upload");
  GAACRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
}
void CudaBackend::download(void* dst, const void* src, size_t bytes) {
  no_capture("download");
  GAACRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  GAACRT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  raise_device_errors();
}
void CudaBackend::synchronize() {
  no_capture("synchronize");
  GAACRT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  raise_device_errors();
}

void CudaBackend::raise_device_errors() {
  if (errors_->code == 0) return;
  const DeviceErrors e = *errors_;
  *errors_ = DeviceErrors{0, 0, 0, 0};
  throw Error("kv", "corrupt_tile", strfmt("layer %d kv-head %d block %d: a compressed tile failed validation on "
                                           "the GPU (reserved tag or escape overrun); its rows were not read",
                                           e.layer, e.head, e.block));
}

void* CudaBackend::grow_buffer(void*& buf, size_t& have, size_t bytes, const char* what, bool optional) {
  if (bytes > have) {
    no_capture(what);
    ++epoch_;
    // The stream may still use the old buffer: wait before freeing it.
    GAACRT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (buf) cudaFree(buf);
    buf = nullptr;
    have = 0;
    const cudaError_t e = cudaMalloc(&buf, bytes);
    if (e == cudaErrorMemoryAllocation && optional) {
      (void)cudaGetLastError();  // clears it: the caller takes the path that needs no buffer
      buf = nullptr;
      return nullptr;
    }
    GAACRT_CUDA_CHECK(e);
    have = bytes;
  }
  return buf;
}
void* CudaBackend::scratch(size_t bytes) {
  return grow_buffer(scratch_, scratch_bytes_, bytes, "growing the scratch buffer", false);
}
void* CudaBackend::expand_buffer(size_t bytes) {
  if (expand_refused_ != 0 && bytes >= expand_refused_) return nullptr;  // not asked again
  void* p = grow_buffer(expand_, expand_bytes_, bytes, "growing the GAAC expansion buffer", true);
  if (p == nullptr) expand_refused_ = bytes;
  return p;
}

namespace {
struct CudaStepGraph final : StepGraph {
  cudaGraphExec_t exec = nullptr;
  ~CudaStepGraph() override {
    if (exec) cudaGraphExecDestroy(exec);
  }
};
bool graphs_enabled() {
  const char* e = std::getenv("GAACRT_CUDA_GRAPH");
  return !(e && e[0] == '0');
}
}  // namespace

bool CudaBackend::begin_capture() {
  if (capturing_ || !graphs_enabled()) return false;
  GAACRT_CUDA_CHECK(cudaSetDevice(device_));
  // Thread-local: another thread's unrelated CUDA calls do not invalidate this recording.
  if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  capturing_ = true;
  return true;
}

std::unique_ptr<StepGraph> CudaBackend::end_capture() {
  if (!capturing_) return nullptr;
  capturing_ = false;
  cudaGraph_t g = nullptr;
  cudaError_t e = cudaStreamEndCapture(stream_, &g);
  if (e != cudaSuccess || !g) {
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();  // an op's launch error invalidated the recording: clear it, run eagerly
    return nullptr;
  }
  auto out = std::make_unique<CudaStepGraph>();
  e = cudaGraphInstantiate(&out->exec, g, 0);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return out;
}

bool CudaBackend::replay(StepGraph& g) {
  if (capturing_ || !graphs_enabled()) return false;
  auto* cg = dynamic_cast<CudaStepGraph*>(&g);
  if (!cg) throw Error("backend", "invalid_argument", "cuda replay: not a graph this backend recorded");
  GAACRT_CUDA_CHECK(cudaGraphLaunch(cg->exec, stream_));
  return true;
}

}  // namespace gaacrt::cuda
