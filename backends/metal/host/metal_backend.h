// metal_backend.h — the Metal backend's portable host logic, shared by the real backend
// (../metal_device.mm, macOS) and the emulated one (metal_emulated.cpp, any OS): every op planned
// (metal_plan.h) and encoded in order, memory tracked by region so that a host read or write of a
// buffer an unfinished kernel uses waits for it, staged bytes and readbacks, completion checks.
//
// Memory is unified (Apple silicon): alloc returns a host pointer into a shared-storage buffer,
// weights are used where the GGUF is mapped (wrapped in a no-copy buffer on first use, page
// aligned), and small host structures the ops receive (block tables, finalize jobs, sequence
// lists) are staged into the dispatch. A platform supplies five primitives (below).
#pragma once
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/error.h"
#include "dispatch.h"

namespace gaacrt::mtl {

class MetalBackendBase : public Backend {
 public:
  ~MetalBackendBase() override;

  void* alloc(size_t bytes) override;
  void free(void* p) override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;
  void synchronize() override { flush(); }
  bool shares_host_memory() const override { return true; }

  void dequantize(const WeightView& w, float* dst) override;
  void matmul(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias) override;
  void get_rows(const WeightView& emb, const int32_t* ids, int64_t n, float scale, float* out) override;
  void rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y) override;
  void rope(float* x, int64_t n_tok, int32_t n_heads, int32_t head_dim, const int32_t* pos,
            const RopeParams& p) override;
  void add(float* y, const float* x, int64_t n) override;
  void act_mul(const float* g, const float* u, int64_t n, Activation act, float* h) override;
  void softcap(float* x, int64_t n, float cap) override;
  void kv_store(const KVLayerView& kv, const KVTokenSlot* slots, int64_t n_tok, const float* k,
                const float* v) override;
  void kv_finalize(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs) override;
  void attention(const KVLayerView& kv, const AttentionArgs& args, const AttnSeq* seqs, int32_t n_seqs,
                 const float* q, float* out) override;

  uint64_t dispatches() const { return n_dispatches_; }
  uint64_t waits() const { return n_waits_; }

 protected:
  // A device buffer argument after resolution: the platform's buffer object and the offset in it,
  // and the host address of the same bytes.
  struct Resolved {
    void* handle = nullptr;  // MTLBuffer (null under the emulation and for staged bytes)
    size_t offset = 0;
    void* host = nullptr;
  };
  // The platform: shared-storage allocation, a no-copy wrapper over mapped host pages, encoding a
  // dispatch (its staged buffers stay valid until wait_all returns; a staged buffer with a readback
  // must hold the kernel's final bytes by then), committing and waiting for everything encoded,
  // and whether a kernel exists.
  virtual void* platform_alloc(size_t bytes, void** handle) = 0;
  virtual void platform_free(void* p, void* handle) = 0;
  virtual void* platform_map(void* page_begin, size_t bytes) = 0;
  virtual void platform_encode(Dispatch& d, const std::vector<Resolved>& buffers) = 0;
  virtual void platform_wait_all() = 0;
  virtual bool platform_has_kernel(const std::string& name) const = 0;
  // Subclasses call this from their destructor, while the platform still exists.
  void release_all();

 private:
  struct Region {
    uintptr_t begin = 0, end = 0;
    void* handle = nullptr;
    bool mapped = false;   // a no-copy wrapper over host memory this backend did not allocate
    bool pending = false;  // used by encoded work that has not completed
  };
  Region& region_of(const void* p, size_t bytes, bool may_map);
  Region* find_alloc(const void* p);
  void wait_for(const void* p);
  // Per-call scratch (attention partials, status words, rotated queries): recycled by size class
  // (powers of two) once the work using it has completed, instead of a buffer allocation per layer.
  void* scratch_get(size_t bytes);
  void scratch_put(void* p);
  void encode(Dispatch d);
  // Commits and waits for everything encoded, then runs the completion checks; raises the first
  // error (a kernel that failed, a corrupt tile), including one deferred by a flush that could not
  // raise (inside free, which destructors call).
  void flush();

  std::vector<Region> allocs_;   // sorted by begin
  std::vector<Region> mapped_;
  std::deque<Dispatch> inflight_;
  // Completion checks and scratch releases; called with false when the work did not complete.
  std::vector<std::function<void(bool completed)>> on_complete_;
  std::unique_ptr<Error> deferred_;
  std::vector<std::pair<size_t, void*>> scratch_free_;  // (size class, allocation)
  std::vector<std::pair<void*, size_t>> scratch_size_;  // allocation -> its size class
  uint64_t n_dispatches_ = 0, n_waits_ = 0;
};

}  // namespace gaacrt::mtl
