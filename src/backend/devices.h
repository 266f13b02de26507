// devices.h — the backend registry: which backends are compiled in, their devices, and how to
// create one. Backends register themselves from their own folder (a static registrar), so the
// core never names a backend and a compiled-out backend simply is not listed.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gaacrt {

class Backend;

struct DeviceInfo {
  std::string backend;          // "cpu", "cuda", "metal"
  int index = 0;
  std::string name;             // "NVIDIA H200", "x86_64 (avx2), 2 threads"
  uint64_t total_memory = 0;    // bytes
  int cc_major = 0, cc_minor = 0;  // CUDA compute capability
  int multiprocessors = 0;
};

// What a backend is created with; each backend reads the fields that apply to it.
struct BackendParams {
  int device = 0;
  int n_threads = 0;  // CPU threads; 0 = all cores
  // Integer matmuls (CPU and CUDA; Metal ignores it): activations quantized to 8 bits (llama.cpp's
  // Q8_0/Q8_1/Q8_K on the CPU, per 32 values on CUDA) or 16 (Q16, ~250x less activation error;
  // backends/cpu/quantize_act.h, backends/cuda/matvec_q8.cu).
  int act_bits = 16;
};

struct BackendEntry {
  const char* name;                                          // "cpu", "cuda"
  std::vector<DeviceInfo> (*list_devices)();                 // empty when none usable
  std::string (*unavailable_reason)();                       // "" when a device is usable
  std::unique_ptr<Backend> (*create)(const BackendParams& p);
};

void register_backend(const BackendEntry& entry);
std::vector<std::string> compiled_backends();
std::vector<DeviceInfo> list_devices(const std::string& backend);
// Why `backend` has no usable device here, e.g. "the CUDA backend was not built into this
// library (nvcc was not found at build time)" or "no CUDA device: ..."; "" when it can be used.
std::string device_unavailable_reason(const std::string& backend);
// Throws Error("backend", "unavailable") with that reason when it cannot be created.
std::unique_ptr<Backend> create_backend(const std::string& backend, const BackendParams& p);
std::unique_ptr<Backend> create_backend(const std::string& backend, int device = 0, int n_threads = 0);

// Defined once per backend: `static BackendRegistrar reg{{"cuda", ...}};`
struct BackendRegistrar {
  explicit BackendRegistrar(const BackendEntry& e) { register_backend(e); }
};

}  // namespace gaacrt
