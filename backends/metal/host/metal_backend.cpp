// metal_backend.cpp — MetalBackendBase: regions, hazards, encoding, and the ops (metal_backend.h).
#include "metal_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "metal_plan.h"

namespace gaacrt::mtl {

MetalBackendBase::~MetalBackendBase() = default;

void MetalBackendBase::release_all() {
  try {
    flush();
  } catch (const Error&) {  // a backend being destroyed has no one left to tell
  }
  deferred_.reset();
  scratch_free_.clear();  // their regions are freed below with every other allocation
  scratch_size_.clear();
  for (Region& r : allocs_) platform_free(reinterpret_cast<void*>(r.begin), r.handle);
  for (Region& r : mapped_) platform_free(nullptr, r.handle);
  allocs_.clear();
  mapped_.clear();
}

// ---- memory and hazards --------------------------------------------------------------------------

void* MetalBackendBase::alloc(size_t bytes) {
  const size_t rounded = std::max<size_t>(256, (bytes + 255) / 256 * 256);
  void* handle = nullptr;
  void* p = platform_alloc(rounded, &handle);
  if (!p) throw Error("backend", "out_of_memory", strfmt("metal: cannot allocate %zu bytes", bytes));
  Region r;
  r.begin = reinterpret_cast<uintptr_t>(p);
  r.end = r.begin + rounded;
  r.handle = handle;
  allocs_.insert(std::upper_bound(allocs_.begin(), allocs_.end(), r,
                                  [](const Region& a, const Region& b) { return a.begin < b.begin; }),
                 r);
  return p;
}

MetalBackendBase::Region* MetalBackendBase::find_alloc(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = std::upper_bound(allocs_.begin(), allocs_.end(), a, [](uintptr_t v, const Region& r) { return v < r.begin; });
  if (it == allocs_.begin()) return nullptr;
  --it;
  return a < it->end ? &*it : nullptr;
}

void MetalBackendBase::free(void* p) {
  if (!p) return;
  Region* r = find_alloc(p);
  if (!r || r->begin != reinterpret_cast<uintptr_t>(p))
    throw Error("backend", "invalid_argument", "metal free: pointer was not returned by alloc");
  if (r->pending) {
    try {  // free must not throw (destructors call it): keep the error for the next sync
      flush();
    } catch (const Error& e) {
      if (!deferred_) deferred_ = std::make_unique<Error>(e);
    }
  }
  r = find_alloc(p);
  platform_free(p, r->handle);
  allocs_.erase(allocs_.begin() + (r - allocs_.data()));
}

MetalBackendBase::Region& MetalBackendBase::region_of(const void* p, size_t bytes, bool may_map) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (Region* r = find_alloc(p)) {
    if (bytes > r->end - a)
      throw Error("backend", "invalid_argument", strfmt("metal: a kernel argument of %zu bytes at offset %zu overruns "
                                                        "its buffer of %zu bytes", bytes, (size_t)(a - r->begin),
                                                        (size_t)(r->end - r->begin)));
    return *r;
  }
  const uintptr_t end = a + std::max<size_t>(bytes, 1);
  for (auto it = mapped_.rbegin(); it != mapped_.rend(); ++it)
    if (a >= it->begin && end <= it->end) return *it;
  if (!may_map) throw Error("backend", "invalid_argument", "metal: pointer is not in memory of this backend");
  // Host memory the backend has not seen (a weight inside the mapped GGUF): wrap its pages.
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  Region r;
  r.begin = a / page * page;
  r.end = (end + page - 1) / page * page;
  r.mapped = true;
  r.handle = platform_map(reinterpret_cast<void*>(r.begin), r.end - r.begin);
  mapped_.push_back(r);
  return mapped_.back();
}

void MetalBackendBase::wait_for(const void* p) {
  Region* r = find_alloc(p);
  if (r && r->pending) flush();
}

void MetalBackendBase::upload(void* dst, const void* src, size_t bytes) {
  wait_for(dst);  // an unfinished kernel may still read (or write) these bytes
  std::memcpy(dst, src, bytes);
}

void MetalBackendBase::download(void* dst, const void* src, size_t bytes) {
  wait_for(src);
  std::memcpy(dst, src, bytes);
}

void* MetalBackendBase::scratch_get(size_t bytes) {
  size_t cls = 256;
  while (cls < bytes) cls *= 2;
  for (size_t i = 0; i < scratch_free_.size(); ++i)
    if (scratch_free_[i].first == cls) {
      void* p = scratch_free_[i].second;
      scratch_free_.erase(scratch_free_.begin() + i);
      return p;
    }
  void* p = alloc(cls);
  scratch_size_.push_back({p, cls});
  return p;
}

void MetalBackendBase::scratch_put(void* p) {
  for (const auto& [q, cls] : scratch_size_)
    if (q == p) {
      scratch_free_.push_back({cls, p});
      return;
    }
}

// ---- encoding and completion ---------------------------------------------------------------------

void MetalBackendBase::encode(Dispatch d) {
  if (!platform_has_kernel(d.kernel))
    throw Error("backend", "missing_kernel", strfmt("metal: no kernel named '%s' in the library", d.kernel.c_str()));
  inflight_.push_back(std::move(d));
  Dispatch& e = inflight_.back();
  std::vector<Resolved> res(e.buffers.size());
  for (size_t i = 0; i < e.buffers.size(); ++i) {
    BufferArg& b = e.buffers[i];
    if (b.is_staged()) {
      res[i].host = b.staged.data();
      continue;
    }
    Region& r = region_of(b.ptr, b.bytes, true);
    r.pending = true;
    res[i].handle = r.handle;
    res[i].offset = reinterpret_cast<uintptr_t>(b.ptr) - r.begin;
    res[i].host = const_cast<void*>(b.ptr);
  }
  platform_encode(e, res);
  ++n_dispatches_;
}

void MetalBackendBase::flush() {
  if (deferred_) {
    Error e(*deferred_);
    deferred_.reset();
    throw e;
  }
  if (inflight_.empty() && on_complete_.empty()) return;
  std::unique_ptr<Error> first;  // every check runs (each frees its scratch); the first error is raised
  bool completed = true;
  try {
    platform_wait_all();
  } catch (const Error& e) {
    first = std::make_unique<Error>(e);
    completed = false;
  }
  ++n_waits_;
  if (completed)
    for (Dispatch& d : inflight_)
      for (BufferArg& b : d.buffers)
        if (b.readback) std::memcpy(b.readback, b.staged.data(), b.staged.size());
  inflight_.clear();
  for (Region& r : allocs_) r.pending = false;
  for (Region& r : mapped_) r.pending = false;
  std::vector<std::function<void(bool)>> done;
  done.swap(on_complete_);
  for (auto& f : done) {
    try {
      f(completed);
    } catch (const Error& e) {
      if (!first) first = std::make_unique<Error>(e);
    }
  }
  if (first) throw Error(*first);
}

// ---- ops -------------------------------------------------------------------------------------------

void MetalBackendBase::dequantize(const WeightView& w, float* dst) { encode(plan_dequantize(w, dst)); }

void MetalBackendBase::matmul(const WeightView& w, const float* x, int64_t n_tok, float* y, const float* bias) {
  if (n_tok > 0) encode(plan_matmul(w, x, n_tok, y, bias));
}

void MetalBackendBase::get_rows(const WeightView& emb, const int32_t* ids, int64_t n, float scale, float* out) {
  if (n > 0) encode(plan_get_rows(emb, ids, n, scale, out));
}

void MetalBackendBase::rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y) {
  if (rows > 0) encode(plan_rms_norm(x, w, eps, rows, dim, y));
}

void MetalBackendBase::rope(float* x, int64_t n_tok, int32_t n_heads, int32_t head_dim, const int32_t* pos,
                            const RopeParams& p) {
  if (n_tok > 0) encode(plan_rope(x, n_tok, n_heads, head_dim, pos, p));
}

void MetalBackendBase::add(float* y, const float* x, int64_t n) {
  if (n > 0) encode(plan_add(y, x, n));
}

void MetalBackendBase::act_mul(const float* g, const float* u, int64_t n, Activation act, float* h) {
  if (n > 0) encode(plan_act_mul(g, u, n, act, h));
}

void MetalBackendBase::softcap(float* x, int64_t n, float cap) {
  if (n > 0) encode(plan_softcap(x, n, cap));
}

void MetalBackendBase::kv_store(const KVLayerView& kv, const KVTokenSlot* slots, int64_t n_tok, const float* k,
                                const float* v) {
  if (n_tok > 0) encode(plan_kv_store(kv, slots, n_tok, k, v));
}

void MetalBackendBase::kv_finalize(const KVLayerView& kv, KVFinalizeJob* jobs, int64_t n_jobs) {
  if (n_jobs <= 0) return;
  if (kv.format == KVFormat::GAAC) {
    encode(plan_kv_finalize_gaac(kv, jobs, n_jobs));
  } else if (kv_format_has_metal_finalize(kv.format)) {
    for (Dispatch& d : plan_kv_finalize_lossy(kv, jobs, n_jobs)) encode(std::move(d));
  } else {  // no compressed class (BF16; FP8 formats: not on Metal yet): every tile keeps its page
    for (int64_t i = 0; i < n_jobs; ++i) jobs[i].fits = 0;
    return;
  }
  flush();  // the cache reads `fits` as soon as this returns
}

void MetalBackendBase::attention(const KVLayerView& kv, const AttentionArgs& args, const AttnSeq* seqs, int32_t n_seqs,
                                 const float* q, float* out) {
  const AttentionPlan part = partition_attention(kv, args, seqs, n_seqs);
  if (part.items.empty()) return;
  float* partials = static_cast<float*>(scratch_get(part.partial_bytes(kv.head_dim_v)));
  int32_t* status = static_cast<int32_t*>(scratch_get(part.status_bytes()));
  const size_t rot_bytes = attention_rotation_bytes(kv, args, seqs, n_seqs);
  float* q_rot = rot_bytes ? static_cast<float*>(scratch_get(rot_bytes)) : nullptr;
  std::vector<Dispatch> ds = plan_attention(kv, args, seqs, n_seqs, q, out, part, partials, status, q_rot);
  for (Dispatch& d : ds) encode(std::move(d));
  const int32_t layer = kv.layer;
  std::vector<AttnItem> items = part.items;
  on_complete_.push_back([this, partials, status, q_rot, layer, items](bool completed) {
    int32_t bad_item = -1, bad_block = -1;
    for (size_t i = 0; completed && i < items.size() * ATTN_SIMDGROUPS && bad_item < 0; ++i)
      if (status[i] >= 0) {
        bad_item = (int32_t)(i / ATTN_SIMDGROUPS);
        bad_block = status[i];
      }
    scratch_put(partials);
    scratch_put(status);
    if (q_rot) scratch_put(q_rot);
    if (bad_item >= 0)
      throw Error("kv", "corrupt_tile", strfmt("layer %d kv-head %u block %d: a compressed tile failed validation "
                                               "(reserved tag or escape overrun); refusing to read it", layer,
                                               items[bad_item].kvh, bad_block));
  });
}

}  // namespace gaacrt::mtl
