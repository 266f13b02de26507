// runtime.cpp — the emulation's dispatcher: threadgroups one after another, each threadgroup's
// lanes as fibers scheduled between synchronisation points (see runtime.h for the rules kept).
#include "runtime.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "emulation/fiber.h"

namespace msl_emu {
namespace {

using gaacrt_emu::FiberContext;
using gaacrt_emu::FiberStack;
using gaacrt_emu::fiber_init;
using gaacrt_emu::fiber_release;
using gaacrt_emu::fiber_switch;

constexpr size_t kStackBytes = 64 * 1024;

enum class Wait : uint8_t { Run, TgBarrier, SimdBarrier, SimdOp, Done };

struct Lane {
  FiberContext ctx;
  Wait wait = Wait::Run;
  const char* file = "";
  int line = 0;
  SimdResolve op = nullptr;
  SimdSlot slot;
  ThreadPos pos;
};

struct Group {
  FiberContext sched;
  const KernelInfo* k = nullptr;
  void* const* args = nullptr;   // buffers, then threadgroup blocks
  Lane* cur = nullptr;
  uint64_t switches = 0;
};

thread_local Group* g_group = nullptr;

std::atomic<uint64_t> g_dispatches{0}, g_threadgroups{0}, g_lanes{0}, g_switches{0};

std::vector<KernelInfo>& registry() {
  static std::vector<KernelInfo> r;
  return r;
}

// Fiber stacks, kept for the life of the OS thread (a dispatch reuses them).
FiberStack& stack_for(uint32_t i) {
  thread_local std::vector<std::unique_ptr<FiberStack>> stacks;
  while (stacks.size() <= i) stacks.push_back(std::make_unique<FiberStack>(kStackBytes));
  return *stacks[i];
}

[[noreturn]] void lane_main(void* p) {
  Lane* lane = static_cast<Lane*>(p);
  Group* g = g_group;
  g->k->thunk(g->args, lane->pos);
  lane->wait = Wait::Done;
  fiber_switch(lane->ctx, g->sched);
  std::fprintf(stderr, "msl_emu: a finished lane was resumed\n");
  std::abort();
}

Group& current(const char* what) {
  if (!g_group || !g_group->cur) {
    std::fprintf(stderr, "msl_emu: %s called outside a kernel dispatch\n", what);
    std::abort();
  }
  return *g_group;
}

void block(Group& g, Wait w, const char* file, int line) {
  Lane* l = g.cur;
  l->wait = w;
  l->file = file;
  l->line = line;
  ++g.switches;
  fiber_switch(l->ctx, g.sched);
}

std::string where(const Group& g, const Lane& l) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "kernel '%s', threadgroup (%u,%u,%u), thread %u", g.k->name, l.pos.tg[0], l.pos.tg[1],
                l.pos.tg[2], l.pos.tiitg);
  return buf;
}

std::string site(const Lane& l) { return std::string(l.file) + ":" + std::to_string(l.line); }

bool same_site(const Lane& a, const Lane& b) { return a.line == b.line && std::strcmp(a.file, b.file) == 0; }

// Releases one SIMD group whose live lanes all wait at the same SIMD function or barrier.
// Returns false when the group is not waiting at a SIMD-scope point (or has no live lane).
bool resolve_simd(Group& g, Lane* lanes, uint32_t n) {
  Lane* first = nullptr;
  for (uint32_t i = 0; i < n; ++i)
    if (lanes[i].wait != Wait::Done) { first = &lanes[i]; break; }
  if (!first || (first->wait != Wait::SimdOp && first->wait != Wait::SimdBarrier)) {
    if (first)
      for (uint32_t i = 0; i < n; ++i)
        if (lanes[i].wait == Wait::SimdOp || lanes[i].wait == Wait::SimdBarrier)
          throw Error(where(g, lanes[i]) + ": SIMD-group call at " + site(lanes[i]) + " while lane " +
                      std::to_string(first->pos.tiisg) + " of its SIMD group waits at " + site(*first) +
                      " (lane-divergent SIMD call; the emulation requires them uniform)");
    return false;
  }
  SimdSlot slots[kSimdWidth];
  bool active[kSimdWidth];
  for (uint32_t i = 0; i < n; ++i) {
    active[i] = lanes[i].wait != Wait::Done;
    if (!active[i]) continue;
    if (lanes[i].wait != first->wait || !same_site(lanes[i], *first) || lanes[i].op != first->op)
      throw Error(where(g, lanes[i]) + ": waits at " + site(lanes[i]) + " while lane " +
                  std::to_string(first->pos.tiisg) + " of its SIMD group waits at " + site(*first) +
                  " (lane-divergent SIMD call; the emulation requires them uniform)");
    slots[i] = lanes[i].slot;
  }
  if (first->wait == Wait::SimdOp) {
    if (const char* err = first->op(slots, active, n))
      throw Error(where(g, *first) + ": SIMD-group function at " + site(*first) + ": " + err);
  }
  for (uint32_t i = 0; i < n; ++i)
    if (active[i]) {
      lanes[i].slot.out = slots[i].out;
      lanes[i].wait = Wait::Run;
    }
  return true;
}

void run_group(Group& g, std::vector<Lane>& lanes) {
  const uint32_t n = (uint32_t)lanes.size();
  for (uint32_t i = 0; i < n; ++i) {
    lanes[i].wait = Wait::Run;
    fiber_init(lanes[i].ctx, stack_for(i), &lane_main, &lanes[i]);
  }
  bool forward = true;
  for (;;) {
    for (uint32_t k = 0; k < n; ++k) {
      Lane& l = lanes[forward ? k : n - 1 - k];
      if (l.wait != Wait::Run) continue;
      g.cur = &l;
      fiber_switch(g.sched, l.ctx);
      ++g.switches;
    }
    g.cur = nullptr;
    forward = !forward;
    uint32_t live = 0;
    for (const Lane& l : lanes) live += l.wait != Wait::Done;
    if (live == 0) break;
    bool released = false;
    for (uint32_t s = 0; s < n; s += kSimdWidth) released |= resolve_simd(g, &lanes[s], kSimdWidth);
    if (released) continue;
    // Every live lane now waits at a threadgroup barrier: the same one, with no lane gone.
    const Lane* first = nullptr;
    for (const Lane& l : lanes)
      if (l.wait == Wait::TgBarrier) { first = &l; break; }
    for (const Lane& l : lanes) {
      if (l.wait == Wait::Done)
        throw Error(where(g, l) + ": returned while other threads wait at the threadgroup_barrier at " + site(*first));
      if (!same_site(l, *first))
        throw Error(where(g, l) + ": waits at the threadgroup_barrier at " + site(l) + ", thread " +
                    std::to_string(first->pos.tiitg) + " at " + site(*first) + " (divergent barrier)");
    }
    for (Lane& l : lanes) l.wait = Wait::Run;
  }
  for (Lane& l : lanes) fiber_release(l.ctx);
}

}  // namespace

uint64_t simd_sync(SimdResolve op, uint64_t in, uint64_t arg, const char* file, int line) {
  Group& g = current("a SIMD-group function");
  Lane* l = g.cur;
  l->op = op;
  l->slot.in = in;
  l->slot.arg = arg;
  block(g, Wait::SimdOp, file, line);
  return l->slot.out;
}

void threadgroup_barrier_sync(const char* file, int line) {
  Group& g = current("threadgroup_barrier");
  block(g, Wait::TgBarrier, file, line);
}

void simdgroup_barrier_sync(const char* file, int line) {
  Group& g = current("simdgroup_barrier");
  g.cur->op = nullptr;
  block(g, Wait::SimdBarrier, file, line);
}

void register_kernel(const KernelInfo& k) { registry().push_back(k); }

const KernelInfo* find_kernel(const std::string& name) {
  for (const KernelInfo& k : registry())
    if (name == k.name) return &k;
  return nullptr;
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> out;
  for (const KernelInfo& k : registry()) out.emplace_back(k.name);
  return out;
}

void run_kernel(const KernelInfo& k, const Launch& l) {
  const std::string name = k.name;
  if (g_group) throw Error("kernel '" + name + "' dispatched from inside another kernel");
  if ((size_t)k.n_params != l.buffers.size() + l.tg_bytes.size() + 4)
    throw Error("kernel '" + name + "' takes " + std::to_string(k.n_params - 4) + " buffer/threadgroup arguments, " +
                "the launch binds " + std::to_string(l.buffers.size()) + " buffers and " +
                std::to_string(l.tg_bytes.size()) + " threadgroup blocks");
  if (l.threads == 0 || l.threads % kSimdWidth || l.threads > kMaxThreads)
    throw Error("kernel '" + name + "': " + std::to_string(l.threads) +
                " threads per threadgroup (must be a multiple of 32, at most 1024)");
  if (l.grid[0] == 0 || l.grid[1] == 0 || l.grid[2] == 0)
    throw Error("kernel '" + name + "': empty grid");
  size_t tg_total = 0;
  for (size_t b : l.tg_bytes) tg_total += b;
  if (tg_total > kMaxThreadgroupBytes)
    throw Error("kernel '" + name + "': " + std::to_string(tg_total) + " bytes of threadgroup memory (at most 32768)");
  for (size_t i = 0; i < l.buffers.size(); ++i)
    if (!l.buffers[i]) throw Error("kernel '" + name + "': buffer " + std::to_string(i) + " is not bound");

  // Threadgroup memory, 16-byte aligned, refilled with a NaN pattern for every threadgroup.
  std::vector<std::vector<uint64_t>> tg_store(l.tg_bytes.size());
  std::vector<void*> tg_ptrs(l.tg_bytes.size());
  for (size_t i = 0; i < l.tg_bytes.size(); ++i) {
    tg_store[i].resize((l.tg_bytes[i] + 15) / 16 * 2 + 2);
    tg_ptrs[i] = tg_store[i].data();
  }
  std::vector<Lane> lanes(l.threads);
  Group g;
  g.k = &k;
  std::vector<void*> args = l.buffers;
  args.insert(args.end(), tg_ptrs.begin(), tg_ptrs.end());
  g.args = args.data();
  g_group = &g;
  struct Reset { ~Reset() { g_group = nullptr; } } reset;
  for (uint32_t z = 0; z < l.grid[2]; ++z)
    for (uint32_t y = 0; y < l.grid[1]; ++y)
      for (uint32_t x = 0; x < l.grid[0]; ++x) {
        for (auto& t : tg_store) std::memset(t.data(), 0xFF, t.size() * sizeof(uint64_t));
        for (uint32_t i = 0; i < l.threads; ++i)
          lanes[i].pos = ThreadPos{{x, y, z}, i, i / kSimdWidth, i % kSimdWidth};
        run_group(g, lanes);
        ++g_threadgroups;
      }
  ++g_dispatches;
  g_lanes += (uint64_t)l.threads * l.grid[0] * l.grid[1] * l.grid[2];
  g_switches += g.switches;
}

Stats stats() {
  Stats s;
  s.dispatches = g_dispatches.load();
  s.threadgroups = g_threadgroups.load();
  s.lanes = g_lanes.load();
  s.switches = g_switches.load();
  return s;
}

}  // namespace msl_emu
