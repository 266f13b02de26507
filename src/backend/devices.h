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

struct BackendEntry {
  const char* name;                                          // "cpu", "cuda"
  std::vector<DeviceInfo> (*list_devices)();                 // empty when none usable
  std::string (*unavailable_reason)();                       // "" when a device is usable
  std::unique_ptr<Backend> (*create)(int device, int n_threads);
};

void register_backend(const BackendEntry& entry);
std::vector<std::string> compiled_backends();
std::vector<DeviceInfo> list_devices(const std::string& backend);
// Why `backend` has no usable device here, e.g. "the CUDA backend was not built into this
// library (nvcc was not found at build time)" or "no CUDA device: ..."; "" when it can be used.
std::string device_unavailable_reason(const std::string& backend);
// Throws Error("backend", "unavailable") with that reason when it cannot be created.
std::unique_ptr<Backend> create_backend(const std::string& backend, int device = 0, int n_threads = 0);

// Defined once per backend: `static BackendRegistrar reg{{"cuda", ...}};`
struct BackendRegistrar {
  explicit BackendRegistrar(const BackendEntry& e) { register_backend(e); }
};

}  // namespace gaacrt
