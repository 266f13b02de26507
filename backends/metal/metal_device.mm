// metal_device.mm — the thin Objective-C++ layer of the Metal backend (macOS, Apple silicon):
// creates the device, queue, library and pipelines, shared-storage buffers (unified memory: the
// host pointer is the buffer's contents), no-copy buffers over mapped weight pages, and encodes
// the dispatches the portable planner describes (host/dispatch.h) into one serial compute encoder
// per command buffer. Every decision (kernel, grid, buffers, hazards, staging) is made in
// host/*.cpp, which is tested on Linux under the MSL emulation; this file is not: it has never been
// compiled or run (no Mac was available) — README, "macOS".
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <dlfcn.h>

#include <cstring>
#include <string>
#include <unordered_map>

#include "common/error.h"
#include "metal/host/metal_backend.h"

namespace gaacrt::mtl {
namespace {

// Directory of the gaacrt library: the .metallib (and the amalgamated source) are installed beside it.
std::string library_dir() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&library_dir), &info) || !info.dli_fname) return ".";
  std::string p = info.dli_fname;
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

NSArray<id<MTLDevice>>* all_devices() {
  NSArray<id<MTLDevice>>* devs = MTLCopyAllDevices();
  if (devs.count == 0) {
    id<MTLDevice> d = MTLCreateSystemDefaultDevice();
    if (d) devs = @[ d ];
  }
  return devs;
}

class MetalBackend final : public MetalBackendBase {
 public:
  explicit MetalBackend(int index) {
    @autoreleasepool {
      NSArray<id<MTLDevice>>* devs = all_devices();
      if (index < 0 || (NSUInteger)index >= devs.count)
        throw Error("backend", "unavailable", strfmt("metal: no device %d (%lu found)", index, (unsigned long)devs.count));
      device_ = devs[(NSUInteger)index];
      queue_ = [device_ newCommandQueue];
      load_library();
      info_.backend = "metal";
      info_.index = index;
      info_.name = std::string(device_.name.UTF8String);
      info_.total_memory = device_.recommendedMaxWorkingSetSize;
    }
  }
  ~MetalBackend() override { release_all(); }
  const DeviceInfo& device() const override { return info_; }

 protected:
  void* platform_alloc(size_t bytes, void** handle) override {
    id<MTLBuffer> b = [device_ newBufferWithLength:bytes options:MTLResourceStorageModeShared];
    if (!b) return nullptr;
    *handle = (__bridge_retained void*)b;
    return b.contents;
  }
  void platform_free(void*, void* handle) override {
    if (handle) (void)(__bridge_transfer id<MTLBuffer>)handle;
  }
  void* platform_map(void* page_begin, size_t bytes) override {
    id<MTLBuffer> b = [device_ newBufferWithBytesNoCopy:page_begin length:bytes
                                                options:MTLResourceStorageModeShared deallocator:nil];
    if (!b) throw Error("backend", "out_of_memory", strfmt("metal: cannot wrap %zu mapped bytes without a copy", bytes));
    return (__bridge_retained void*)b;
  }

  void platform_encode(Dispatch& d, const std::vector<Resolved>& res) override {
    @autoreleasepool {
      id<MTLComputePipelineState> pso = pipeline(d.kernel);
      if (d.threads > pso.maxTotalThreadsPerThreadgroup)
        throw Error("backend", "unsupported", strfmt("metal: kernel '%s' needs %u threads per threadgroup, the pipeline "
                                                     "allows %lu", d.kernel.c_str(), d.threads,
                                                     (unsigned long)pso.maxTotalThreadsPerThreadgroup));
      if (!cmd_) {
        cmd_ = [queue_ commandBuffer];
        enc_ = [cmd_ computeCommandEncoderWithDispatchType:MTLDispatchTypeSerial];  // dispatches in order
      }
      [enc_ setComputePipelineState:pso];
      for (size_t i = 0; i < d.buffers.size(); ++i) {
        BufferArg& b = d.buffers[i];
        if (!b.is_staged()) {
          [enc_ setBuffer:(__bridge id<MTLBuffer>)res[i].handle offset:res[i].offset atIndex:i];
        } else if (!b.readback && b.staged.size() <= 4096) {
          [enc_ setBytes:b.staged.data() length:b.staged.size() atIndex:i];  // copied now
        } else {
          id<MTLBuffer> t = [device_ newBufferWithBytes:b.staged.data() length:b.staged.size()
                                                options:MTLResourceStorageModeShared];
          [enc_ setBuffer:t offset:0 atIndex:i];
          temps_.push_back({t, b.readback ? &b : nullptr});
        }
      }
      for (size_t i = 0; i < d.tg_bytes.size(); ++i)
        [enc_ setThreadgroupMemoryLength:(d.tg_bytes[i] + 15) / 16 * 16 atIndex:i];
      [enc_ dispatchThreadgroups:MTLSizeMake(d.grid[0], d.grid[1], d.grid[2])
           threadsPerThreadgroup:MTLSizeMake(d.threads, 1, 1)];
    }
  }

  void platform_wait_all() override {
    if (!cmd_) return;
    @autoreleasepool {
      [enc_ endEncoding];
      [cmd_ commit];
      [cmd_ waitUntilCompleted];
      const bool failed = cmd_.status == MTLCommandBufferStatusError;
      std::string why = failed && cmd_.error ? cmd_.error.localizedDescription.UTF8String : "";
      for (Temp& t : temps_)
        if (t.readback_into && !failed) std::memcpy(t.readback_into->staged.data(), t.buffer.contents, t.readback_into->staged.size());
      temps_.clear();
      enc_ = nil;
      cmd_ = nil;
      if (failed) throw Error("backend", "kernel_failed", "metal: command buffer failed: " + why);
    }
  }

  bool platform_has_kernel(const std::string& name) const override {
    @autoreleasepool {
      id<MTLFunction> f = [library_ newFunctionWithName:[NSString stringWithUTF8String:name.c_str()]];
      return f != nil;
    }
  }

 private:
  // The installed .metallib, else the amalgamated source compiled now (safe math: no fast-math
  // reassociation where the CPU reference and GAAC == BF16 need exact rounding).
  void load_library() {
    NSError* err = nil;
    const std::string dir = library_dir();
    NSString* lib = [NSString stringWithUTF8String:(dir + "/gaacrt.metallib").c_str()];
    if ([[NSFileManager defaultManager] fileExistsAtPath:lib]) {
      library_ = [device_ newLibraryWithURL:[NSURL fileURLWithPath:lib] error:&err];
      if (library_) return;
    }
    NSString* src_path = [NSString stringWithUTF8String:(dir + "/gaacrt_kernels.metal").c_str()];
    NSString* src = [NSString stringWithContentsOfFile:src_path encoding:NSUTF8StringEncoding error:&err];
    if (!src)
      throw Error("backend", "unavailable", "metal: neither gaacrt.metallib nor gaacrt_kernels.metal beside the library in " + dir);
    MTLCompileOptions* opt = [MTLCompileOptions new];
    opt.fastMathEnabled = NO;
    opt.languageVersion = MTLLanguageVersion3_0;
    library_ = [device_ newLibraryWithSource:src options:opt error:&err];
    if (!library_)
      throw Error("backend", "unavailable", std::string("metal: compiling the kernel source failed: ") +
                                                (err ? err.localizedDescription.UTF8String : "?"));
  }

  id<MTLComputePipelineState> pipeline(const std::string& name) {
    auto it = pipelines_.find(name);
    if (it != pipelines_.end()) return it->second;
    NSError* err = nil;
    id<MTLFunction> f = [library_ newFunctionWithName:[NSString stringWithUTF8String:name.c_str()]];
    if (!f) throw Error("backend", "missing_kernel", "metal: no kernel named '" + name + "' in the library");
    id<MTLComputePipelineState> p = [device_ newComputePipelineStateWithFunction:f error:&err];
    if (!p) throw Error("backend", "kernel_failed", "metal: pipeline for '" + name + "': " +
                                                        (err ? err.localizedDescription.UTF8String : "?"));
    pipelines_[name] = p;
    return p;
  }

  struct Temp {
    id<MTLBuffer> buffer;
    BufferArg* readback_into;  // the staged buffer to refresh after completion, or null
  };
  id<MTLDevice> device_ = nil;
  id<MTLCommandQueue> queue_ = nil;
  id<MTLLibrary> library_ = nil;
  id<MTLCommandBuffer> cmd_ = nil;
  id<MTLComputeCommandEncoder> enc_ = nil;
  std::unordered_map<std::string, id<MTLComputePipelineState>> pipelines_;
  std::vector<Temp> temps_;
  DeviceInfo info_;
};

std::vector<DeviceInfo> list_metal() {
  std::vector<DeviceInfo> out;
  @autoreleasepool {
    NSArray<id<MTLDevice>>* devs = all_devices();
    for (NSUInteger i = 0; i < devs.count; ++i) {
      DeviceInfo d;
      d.backend = "metal";
      d.index = (int)i;
      d.name = devs[i].name.UTF8String;
      d.total_memory = devs[i].recommendedMaxWorkingSetSize;
      out.push_back(d);
    }
  }
  return out;
}

std::string metal_reason() {
  @autoreleasepool {
    if (all_devices().count == 0) return "no Metal device on this Mac";
    id<MTLDevice> d = all_devices()[0];
    if (![d supportsFamily:MTLGPUFamilyApple7] && ![d supportsFamily:MTLGPUFamilyMetal3])
      return std::string("the Metal device '") + d.name.UTF8String + "' lacks Metal 3 (Apple silicon M1 or newer needed)";
  }
  return "";
}

std::unique_ptr<Backend> create_metal(const BackendParams& p) { return std::make_unique<MetalBackend>(p.device); }

const BackendRegistrar kRegisterMetal{{"metal", &list_metal, &metal_reason, &create_metal}};

}  // namespace
}  // namespace gaacrt::mtl
