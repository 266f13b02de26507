// devices.cpp — the backend registry.
#include "devices.h"

#include "backend.h"
#include "common/error.h"

namespace gaacrt {
namespace {

std::vector<BackendEntry>& registry() {
  static std::vector<BackendEntry> entries;  // function-local: safe during static init
  return entries;
}

const BackendEntry* find_entry(const std::string& name) {
  for (const BackendEntry& e : registry())
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace

void register_backend(const BackendEntry& entry) { registry().push_back(entry); }

std::vector<std::string> compiled_backends() {
  std::vector<std::string> out;
  for (const BackendEntry& e : registry()) out.emplace_back(e.name);
  return out;
}

std::vector<DeviceInfo> list_devices(const std::string& backend) {
  const BackendEntry* e = find_entry(backend);
  return e ? e->list_devices() : std::vector<DeviceInfo>{};
}

std::string device_unavailable_reason(const std::string& backend) {
  const BackendEntry* e = find_entry(backend);
  if (!e) {
    if (backend == "cuda")
      return "the CUDA backend was not built into this library (nvcc was not found at build time, "
             "or GAACRT_CUDA=OFF)";
    if (backend == "metal") return "the Metal backend is only built on macOS";
    return "unknown backend '" + backend + "' (known: cpu, cuda, metal)";
  }
  return e->unavailable_reason();
}

std::unique_ptr<Backend> create_backend(const std::string& backend, const BackendParams& p) {
  const std::string why = device_unavailable_reason(backend);
  if (!why.empty()) throw Error("backend", "unavailable", backend + ": " + why);
  return find_entry(backend)->create(p);
}

std::unique_ptr<Backend> create_backend(const std::string& backend, int device, int n_threads) {
  BackendParams p;
  p.device = device;
  p.n_threads = n_threads;
  return create_backend(backend, p);
}

}  // namespace gaacrt
