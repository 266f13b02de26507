// metal_emulated.cpp — the backend "metal-emulated": the Metal backend's host logic
// (MetalBackendBase) over the MSL emulation (backends/metal/emulation): the very same .metal
// kernels, compiled as C++, run with a threadgroup's lanes as fibers. Dispatches are queued and
// run only when the host must see results (synchronize, a download, a host write to a buffer an
// unfinished kernel uses), exactly where a GPU would make the host wait — so a missing wait in the
// host logic shows up here as a wrong result. Built on every platform the emulation supports; it
// exists to test the kernels and the host logic, and is never chosen by backend="auto".
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "emulation/fiber.h"
#include "metal/emulation/runtime.h"
#include "metal/host/metal_backend.h"

namespace gaacrt::mtl {
namespace {

class MetalEmulatedBackend final : public MetalBackendBase {
 public:
  MetalEmulatedBackend() {
    info_.backend = "metal-emulated";
    info_.name = strfmt("Metal kernels under the MSL emulation (CPU, fibers: %s)", gaacrt_emu::fiber_switch_kind());
  }
  ~MetalEmulatedBackend() override { release_all(); }
  const DeviceInfo& device() const override { return info_; }

 protected:
  void* platform_alloc(size_t bytes, void** handle) override {
    *handle = nullptr;
    return std::aligned_alloc(256, bytes);
  }
  void platform_free(void* p, void*) override { std::free(p); }
  void* platform_map(void*, size_t) override { return nullptr; }
  void platform_encode(Dispatch& d, const std::vector<Resolved>& buffers) override {
    Queued q;
    q.kernel = msl_emu::find_kernel(d.kernel);
    q.launch.grid[0] = d.grid[0];
    q.launch.grid[1] = d.grid[1];
    q.launch.grid[2] = d.grid[2];
    q.launch.threads = d.threads;
    for (const Resolved& r : buffers) q.launch.buffers.push_back(r.host);  // staged bytes live in d until the wait
    for (uint32_t b : d.tg_bytes) q.launch.tg_bytes.push_back(b);
    queue_.push_back(std::move(q));
  }
  void platform_wait_all() override {
    std::vector<Queued> run;
    run.swap(queue_);
    for (const Queued& q : run) {
      try {
        msl_emu::run_kernel(*q.kernel, q.launch);
      } catch (const msl_emu::Error& e) {
        throw Error("backend", "kernel_failed", strfmt("metal-emulated: %s", e.what()));
      }
    }
  }
  bool platform_has_kernel(const std::string& name) const override { return msl_emu::find_kernel(name) != nullptr; }

 private:
  struct Queued {
    const msl_emu::KernelInfo* kernel;
    msl_emu::Launch launch;
  };
  std::vector<Queued> queue_;
  DeviceInfo info_;
};

std::vector<DeviceInfo> list_emulated() {
  DeviceInfo d;
  d.backend = "metal-emulated";
  d.name = "MSL emulation on the CPU";
  return {d};
}
std::string emulated_reason() { return ""; }
std::unique_ptr<Backend> create_emulated(const BackendParams&) { return std::make_unique<MetalEmulatedBackend>(); }

const BackendRegistrar kRegisterMetalEmulated{{"metal-emulated", &list_emulated, &emulated_reason, &create_emulated}};

}  // namespace
}  // namespace gaacrt::mtl
