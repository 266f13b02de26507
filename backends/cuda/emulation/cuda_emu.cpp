// cuda_emu.cpp — the CUDA emulation's scheduler, warp collectives, async copies and runtime API
// (cuda_emu.h says what is kept from the GPU and what is not; the matrix warp functions, ldmatrix
// to mma.sync, are cuda_emu_mma.cpp).
#include "cuda_runtime.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "emulation/fiber.h"

thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;

namespace gaacrt_cuda_emu {

using gaacrt_emu::FiberContext;
using gaacrt_emu::FiberStack;

namespace {

constexpr size_t kStackBytes = 256 * 1024;
constexpr unsigned kMaxThreads = 1024;
constexpr size_t kDefaultSmem = 48 * 1024, kOptinSmem = 227 * 1024, kSmemPerSm = 228 * 1024;

struct Fault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Wait : uint8_t { Run, Warp, Bar, Spin, Done };

struct CpCopy {
  void* dst;
  const void* src;
  uint32_t bytes, src_bytes;
};
struct Mbar {
  uint32_t count = 1, pending = 1;
  int64_t tx = 0;
  uint32_t phases = 0;  // completed phases
  std::vector<CpCopy> copies;
};

}  // namespace

struct ThreadState {
  FiberContext ctx;
  Wait wait = Wait::Run;
  const char* file = "";
  int line = 0;
  uint3 tid{0, 0, 0};
  unsigned index = 0, lane = 0, warp = 0;
  Resolve op = nullptr;
  uint32_t mask = 0;
  Slot* slot = nullptr;
  int bar_kind = 0, bar_pred = 0, bar_result = 0;
  std::vector<CpCopy> open;                // cp.async not yet committed
  std::deque<std::vector<CpCopy>> groups;  // committed groups, oldest first
};

namespace {

struct Block {
  FiberContext sched;
  const std::function<void()>* body = nullptr;
  std::string kernel;
  uint3 bid{0, 0, 0};
  ThreadState* cur = nullptr;
  uint8_t* smem = nullptr;
  std::unordered_map<uint64_t*, Mbar> mbars;
  std::string fault;
  uint64_t epoch = 0;  // bumped by every change another thread could be waiting for
};

thread_local Block* g_block = nullptr;

FiberStack& stack_for(size_t i) {
  thread_local std::vector<std::unique_ptr<FiberStack>> stacks;
  while (stacks.size() <= i) stacks.push_back(std::make_unique<FiberStack>(kStackBytes));
  return *stacks[i];
}

std::string site(const ThreadState& t) { return std::string(t.file) + ":" + std::to_string(t.line); }

std::string where(const Block& b, const ThreadState& t) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "block (%u,%u,%u), thread %u (warp %u, lane %u)", b.bid.x, b.bid.y, b.bid.z, t.index,
                t.warp, t.lane);
  return "kernel '" + b.kernel + "', " + buf;
}

// A fault inside a thread's code: recorded, and the thread is never resumed (the launch fails).
[[noreturn]] void fault(const std::string& msg) {
  Block* b = g_block;
  ThreadState* t = b ? b->cur : nullptr;
  if (!b || !t) {
    std::fprintf(stderr, "cuda-emulated: %s (outside a kernel)\n", msg.c_str());
    std::abort();
  }
  if (b->fault.empty()) b->fault = where(*b, *t) + ": " + msg;
  t->wait = Wait::Done;
  gaacrt_emu::fiber_switch(t->ctx, b->sched);
  std::abort();
}

void suspend(ThreadState& t, Wait w, const char* file, int line) {
  t.wait = w;
  t.file = file;
  t.line = line;
  gaacrt_emu::fiber_switch(t.ctx, g_block->sched);
}

[[noreturn]] void thread_main(void* p) {
  ThreadState* t = static_cast<ThreadState*>(p);
  Block* b = g_block;
  (*b->body)();
  t->open.clear();  // copies never waited for: nothing reads them
  t->groups.clear();
  t->wait = Wait::Done;
  gaacrt_emu::fiber_switch(t->ctx, b->sched);
  std::abort();
}

bool in_mask(uint32_t mask, unsigned lane) { return (mask >> lane) & 1u; }

// Releases the warp collectives of warp w that every live lane of their mask has reached.
bool resolve_warp(Block& b, ThreadState* const* lanes) {
  bool released = false;
  for (unsigned i = 0; i < 32; ++i) {
    ThreadState* t = lanes[i];
    if (!t || t->wait != Wait::Warp) continue;
    if (!in_mask(t->mask, i))
      throw Fault(where(b, *t) + ": warp function at " + site(*t) + " with a mask that leaves out the calling lane");
    uint32_t part = 0;
    bool ready = true;
    for (unsigned j = 0; j < 32 && ready; ++j) {
      if (!in_mask(t->mask, j)) continue;
      ThreadState* u = lanes[j];
      if (!u || u->wait == Wait::Done) continue;
      if (u->wait != Wait::Warp || u->line != t->line || u->mask != t->mask || u->op != t->op ||
          (u->file != t->file && std::strcmp(u->file, t->file) != 0))
        ready = false;
      else
        part |= 1u << j;
    }
    if (!ready) continue;
    if (t->op) {
      Slot slots[32];
      for (unsigned j = 0; j < 32; ++j)
        if (in_mask(part, j)) slots[j] = *lanes[j]->slot;
      if (const char* err = t->op(slots, part)) throw Fault(where(b, *t) + ": at " + site(*t) + ": " + err);
      for (unsigned j = 0; j < 32; ++j)
        if (in_mask(part, j)) std::memcpy(lanes[j]->slot->out, slots[j].out, sizeof slots[j].out);
    }
    for (unsigned j = 0; j < 32; ++j)
      if (in_mask(part, j)) lanes[j]->wait = Wait::Run;
    released = true;
  }
  return released;
}

std::string waits_report(const std::vector<ThreadState>& ts) {
  std::map<std::string, std::vector<unsigned>> by_site;
  for (const ThreadState& t : ts)
    if (t.wait != Wait::Done) {
      const char* what = t.wait == Wait::Warp ? "warp function" : t.wait == Wait::Bar ? "__syncthreads" : "spin-wait";
      by_site[std::string(what) + " at " + site(t)].push_back(t.index);
    }
  std::string out;
  for (const auto& [s, v] : by_site) {
    out += "\n  " + s + ": threads " + std::to_string(v.front());
    if (v.size() > 1) out += " .. " + std::to_string(v.back()) + " (" + std::to_string(v.size()) + ")";
  }
  return out;
}

void run_block(Block& b, std::vector<ThreadState>& ts) {
  const size_t n = ts.size();
  for (size_t i = 0; i < n; ++i) {
    ts[i].wait = Wait::Run;
    gaacrt_emu::fiber_init(ts[i].ctx, stack_for(i), &thread_main, &ts[i]);
  }
  std::vector<ThreadState*> lanes(((n + 31) / 32) * 32, nullptr);
  for (size_t i = 0; i < n; ++i) lanes[i] = &ts[i];
  bool forward = true;
  int idle_rounds = 0;
  for (;;) {
    const uint64_t epoch0 = b.epoch;
    bool ran_only_spins = true;
    for (size_t k = 0; k < n; ++k) {
      ThreadState& t = ts[forward ? k : n - 1 - k];
      if (t.wait != Wait::Run) continue;
      b.cur = &t;
      threadIdx = t.tid;
      gaacrt_emu::fiber_switch(b.sched, t.ctx);
      if (!b.fault.empty()) throw Fault(b.fault);
      if (t.wait != Wait::Spin) ran_only_spins = false;
    }
    b.cur = nullptr;
    forward = !forward;
    size_t live = 0, at_bar = 0, spinning = 0;
    for (const ThreadState& t : ts) {
      live += t.wait != Wait::Done;
      at_bar += t.wait == Wait::Bar;
      spinning += t.wait == Wait::Spin;
    }
    if (live == 0) break;
    bool released = false;
    for (size_t w = 0; w < lanes.size(); w += 32) released |= resolve_warp(b, &lanes[w]);
    if (!released && at_bar == live) {
      int kind = -1, acc_or = 0, acc_and = 1, count = 0;
      for (const ThreadState& t : ts) {
        if (t.wait != Wait::Bar) continue;
        if (kind >= 0 && t.bar_kind != kind)
          throw Fault(where(b, t) + ": __syncthreads variants differ across the block (" + site(t) + ")");
        kind = t.bar_kind;
        acc_or |= t.bar_pred != 0;
        acc_and &= t.bar_pred != 0;
        count += t.bar_pred != 0;
      }
      for (ThreadState& t : ts)
        if (t.wait == Wait::Bar) {
          t.bar_result = kind == 1 ? acc_or : kind == 2 ? acc_and : count;
          t.wait = Wait::Run;
        }
      released = true;
    }
    for (ThreadState& t : ts)
      if (t.wait == Wait::Spin) t.wait = Wait::Run;
    if (released || b.epoch != epoch0 || !ran_only_spins) {
      idle_rounds = 0;
      if (released || spinning > 0) continue;
    }
    if (spinning > 0 && ++idle_rounds < 3) continue;
    throw Fault("kernel '" + b.kernel + "', block (" + std::to_string(b.bid.x) + "," + std::to_string(b.bid.y) + "," +
                std::to_string(b.bid.z) + "): no thread can move (deadlock or divergent synchronisation):" +
                waits_report(ts));
  }
  for (ThreadState& t : ts) gaacrt_emu::fiber_release(t.ctx);
}

// The kernel's name from the dynamic symbol table, else (kernels in anonymous namespaces have no
// dynamic symbol) its parameter list as the launch template saw it.
std::string kernel_name(const void* k, const char* signature) {
  Dl_info info{};
  if (dladdr(k, &info) && info.dli_sname) {
    int status = 0;
    char* d = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    std::string s = status == 0 && d ? d : info.dli_sname;
    std::free(d);
    return s;
  }
  return signature;
}

int worker_count() {
  static const int n = [] {
    const char* v = std::getenv("GAACRT_CUDA_EMU_THREADS");
    const int hw = (int)std::thread::hardware_concurrency();
    const int k = v && *v ? std::atoi(v) : (hw > 0 ? hw : 1);
    return k < 1 ? 1 : (k > 8 ? 8 : k);
  }();
  return n;
}

// Persistent worker threads (their fiber stacks are kept between launches): run_on_workers(n, fn)
// calls fn(0) on the calling thread and fn(1) .. fn(n - 1) on workers, and returns when all are
// done. Launches from several host threads take turns.
class Workers {
 public:
  void run(int n, const std::function<void(int)>& fn) {
    std::lock_guard<std::mutex> turn(turn_mu_);
    {
      std::unique_lock<std::mutex> lk(mu_);
      while ((int)threads_.size() < n - 1) {
        const int k = (int)threads_.size() + 1;
        threads_.emplace_back([this, k] { loop(k); });
      }
      job_ = &fn;
      active_ = n;
      pending_ = n - 1;
      ++gen_;
    }
    cv_.notify_all();
    fn(0);
    std::unique_lock<std::mutex> lk(mu_);
    done_.wait(lk, [this] { return pending_ == 0; });
    job_ = nullptr;
  }
  ~Workers() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      ++gen_;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void loop(int k) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return gen_ != seen; });
        seen = gen_;
        if (stop_) return;
        if (k >= active_) continue;
        job = job_;
      }
      (*job)(k);
      std::lock_guard<std::mutex> lk(mu_);
      if (--pending_ == 0) done_.notify_all();
    }
  }
  std::mutex turn_mu_, mu_;
  std::condition_variable cv_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* job_ = nullptr;
  int active_ = 0, pending_ = 0;
  uint64_t gen_ = 0;
  bool stop_ = false;
};

void run_on_workers(int n, const std::function<void(int)>& fn) {
  static Workers* workers = new Workers;  // never destroyed: workers may outlive static destruction order
  workers->run(n, fn);
}

std::mutex g_attr_mu;
std::unordered_map<const void*, size_t>& smem_limits() {
  static std::unordered_map<const void*, size_t> m;
  return m;
}

void run_grid(const void* kernel, const char* signature, dim3 grid, dim3 block, size_t smem,
              const std::function<void()>& body) {
  if (g_block) throw Fault("a kernel launched from inside another kernel");
  const uint64_t threads = (uint64_t)block.x * block.y * block.z;
  const std::string name = kernel_name(kernel, signature);
  if (threads == 0 || threads > kMaxThreads || block.z > 64)
    throw Fault("kernel '" + name + "': " + std::to_string(threads) + " threads per block (1 .. 1024)");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 || grid.x > 0x7FFFFFFFu)
    throw Fault("kernel '" + name + "': grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) + "," +
                std::to_string(grid.z) + ") out of range");
  size_t limit = kDefaultSmem;
  {
    std::lock_guard<std::mutex> lk(g_attr_mu);
    auto it = smem_limits().find(kernel);
    if (it != smem_limits().end()) limit = it->second;
  }
  if (smem > limit)
    throw Fault("kernel '" + name + "': " + std::to_string(smem) + " bytes of dynamic shared memory, above the " +
                std::to_string(limit) + " it may use (cudaFuncAttributeMaxDynamicSharedMemorySize)");
  // Blocks are dealt to worker OS threads (GAACRT_CUDA_EMU_THREADS, default: the CPU count, at
  // most 8), block i to worker i % n: blocks run concurrently as on a GPU, each worker's blocks
  // one after another (its fibers, positions and static shared variables are its own).
  const uint64_t n_blocks = (uint64_t)grid.x * grid.y * grid.z;
  const int n_workers = (int)std::min<uint64_t>(n_blocks, (uint64_t)worker_count());
  std::vector<std::string> faults(n_workers);
  auto work = [&](int w) {
    std::vector<uint64_t> smem_store(smem / 8 + 2);
    Block b;
    b.body = &body;
    b.kernel = name;
    gridDim = grid;
    blockDim = block;
    b.smem = reinterpret_cast<uint8_t*>(smem_store.data());
    std::vector<ThreadState> ts(threads);
    for (unsigned i = 0; i < threads; ++i) {
      ts[i].index = i;
      ts[i].lane = i % 32;
      ts[i].warp = i / 32;
      ts[i].tid = uint3{i % block.x, (i / block.x) % block.y, (unsigned)(i / (block.x * block.y))};
    }
    g_block = &b;
    struct Reset {
      ~Reset() { g_block = nullptr; }
    } reset;
    try {
      for (uint64_t i = (uint64_t)w; i < n_blocks; i += (uint64_t)n_workers) {
        b.bid = uint3{(unsigned)(i % grid.x), (unsigned)((i / grid.x) % grid.y), (unsigned)(i / ((uint64_t)grid.x * grid.y))};
        blockIdx = b.bid;
        b.mbars.clear();
        std::memset(smem_store.data(), 0xFF, smem_store.size() * 8);
        for (ThreadState& t : ts) {
          t.open.clear();
          t.groups.clear();
        }
        run_block(b, ts);
      }
    } catch (const Fault& f) {
      faults[w] = f.what();
    }
  };
  if (n_workers <= 1) work(0);
  else run_on_workers(n_workers, work);
  for (const std::string& f : faults)
    if (!f.empty()) throw Fault(f);
}

}  // namespace

// ---- the running thread ---------------------------------------------------------------------------
ThreadState& cur(const char* what) {
  if (!g_block || !g_block->cur) {
    std::fprintf(stderr, "cuda-emulated: %s called outside a kernel\n", what);
    std::abort();
  }
  return *g_block->cur;
}
uint8_t* dynamic_smem() {
  cur("dynamic shared memory");
  return g_block->smem;
}
unsigned lane_id() { return cur("the lane id").lane; }

// ---- synchronisation ----------------------------------------------------------------------------------
void warp_collective(Resolve op, uint32_t mask, Slot& s, const char* file, int line) {
  ThreadState& t = cur("a warp function");
  t.op = op;
  t.mask = mask;
  t.slot = &s;
  suspend(t, Wait::Warp, file, line);
}

void block_barrier(const char* file, int line) { (void)block_barrier_reduce(0, 0, file, line); }

int block_barrier_reduce(int pred, int kind, const char* file, int line) {
  ThreadState& t = cur("__syncthreads");
  t.bar_kind = kind;
  t.bar_pred = pred;
  suspend(t, Wait::Bar, file, line);
  return t.bar_result;
}

void yield_spin(const char* file, int line) { suspend(cur("a spin-wait"), Wait::Spin, file, line); }

namespace {
const char* resolve_shuffle(Slot* s, uint32_t part) {
  for (unsigned i = 0; i < 32; ++i) {
    if (!in_mask(part, i)) continue;
    const int arg = (int)s[i].in[2], width = (int)s[i].in[3];
    const Shfl kind = (Shfl)s[i].in[4];
    if (width <= 0 || width > 32 || (width & (width - 1)))
      return "shuffle width must be a power of two up to 32";
    const int seg = (int)i & ~(width - 1), pos = (int)i - seg;
    int src = (int)i;
    switch (kind) {
      case Shfl::Idx: src = seg + (arg & (width - 1)); break;
      case Shfl::Xor: src = (int)i ^ arg; if (src < seg || src >= seg + width) src = (int)i; break;
      case Shfl::Up: if (pos >= arg) src = (int)i - arg; break;
      case Shfl::Down: if (pos + arg < width) src = (int)i + arg; break;
    }
    if (src < 0 || src > 31 || !in_mask(part, (unsigned)src)) return "shuffle reads a lane outside the mask or exited";
    s[i].out[0] = s[src].in[0];
    s[i].out[1] = s[src].in[1];
  }
  return nullptr;
}
const char* resolve_ballot(Slot* s, uint32_t part) {
  uint32_t b = 0;
  for (unsigned i = 0; i < 32; ++i)
    if (in_mask(part, i) && s[i].in[0]) b |= 1u << i;
  for (unsigned i = 0; i < 32; ++i) s[i].out[0] = b;
  return nullptr;
}
}  // namespace

uint64_t shuffle(uint32_t mask, uint64_t v, int arg, int width, Shfl kind, const char* file, int line) {
  Slot s{};
  s.in[0] = (uint32_t)v;
  s.in[1] = (uint32_t)(v >> 32);
  s.in[2] = (uint32_t)arg;
  s.in[3] = (uint32_t)width;
  s.in[4] = (uint32_t)kind;
  warp_collective(&resolve_shuffle, mask, s, file, line);
  return (uint64_t)s.out[0] | ((uint64_t)s.out[1] << 32);
}

// ---- asynchronous copies ------------------------------------------------------------------------------
namespace {
void land(const CpCopy& c) {
  const uint32_t n = c.src_bytes < c.bytes ? c.src_bytes : c.bytes;
  if (n) std::memcpy(c.dst, c.src, n);
  if (n < c.bytes) std::memset(static_cast<uint8_t*>(c.dst) + n, 0, c.bytes - n);
}
Mbar& mbar_of(uint64_t* bar, const char* what) {
  auto it = g_block->mbars.find(bar);
  if (it == g_block->mbars.end()) fault(std::string(what) + " on an mbarrier that was not initialised");
  return it->second;
}
void mbar_settle(Mbar& m) {
  if (m.pending == 0 && m.tx == 0) {
    ++m.phases;
    m.pending = m.count;
    ++g_block->epoch;
  }
}
}  // namespace

void cp_async(void* dst, const void* src, uint32_t bytes, uint32_t src_bytes) {
  ThreadState& t = cur("cp.async");
  if (((uintptr_t)dst | (uintptr_t)src) % bytes) fault("cp.async with a misaligned address");
  t.open.push_back(CpCopy{dst, src, bytes, src_bytes});
}
void cp_async_commit() {
  ThreadState& t = cur("cp.async.commit_group");
  t.groups.push_back(std::move(t.open));
  t.open.clear();
}
void cp_async_wait(int n) {
  ThreadState& t = cur("cp.async.wait_group");
  while (t.groups.size() > (size_t)n) {
    for (const CpCopy& c : t.groups.front()) land(c);
    t.groups.pop_front();
  }
}

void mbar_init(uint64_t* bar, uint32_t count) {
  cur("mbarrier.init");
  Mbar m;
  m.count = m.pending = count;
  g_block->mbars[bar] = m;
  ++g_block->epoch;
}
void mbar_inval(uint64_t* bar) {
  cur("mbarrier.inval");
  Mbar& m = mbar_of(bar, "mbarrier.inval");
  if (!m.copies.empty()) fault("mbarrier.inval with bulk copies still in flight");
  g_block->mbars.erase(bar);
}
void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  cur("mbarrier.arrive.expect_tx");
  Mbar& m = mbar_of(bar, "mbarrier.arrive.expect_tx");
  if (m.pending == 0) fault("mbarrier arrival past the expected count");
  m.tx += bytes;
  --m.pending;
  ++g_block->epoch;
  mbar_settle(m);
}
void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  cur("cp.async.bulk");
  if (((uintptr_t)dst | (uintptr_t)src | bytes) % 16) fault("cp.async.bulk: addresses and size must be multiples of 16");
  mbar_of(bar, "cp.async.bulk").copies.push_back(CpCopy{dst, src, bytes, bytes});
  ++g_block->epoch;
}
void mbar_wait(uint64_t* bar, uint32_t parity, const char* file, int line) {
  cur("mbarrier.try_wait");
  for (;;) {
    Mbar& m = mbar_of(bar, "mbarrier.try_wait");
    if (!m.copies.empty()) {
      for (const CpCopy& c : m.copies) {
        land(c);
        m.tx -= c.bytes;
      }
      m.copies.clear();
      ++g_block->epoch;
      mbar_settle(m);
    }
    if ((m.phases & 1u) != (parity & 1u)) return;
    yield_spin(file, line);
  }
}

uint64_t globaltimer_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// ---- runtime API -----------------------------------------------------------------------------------
}  // namespace gaacrt_cuda_emu

void __syncwarp(unsigned mask, const char* file, int line) {
  gaacrt_cuda_emu::Slot s{};
  gaacrt_cuda_emu::warp_collective(nullptr, mask, s, file, line);
}
unsigned __ballot_sync(unsigned mask, int pred, const char* file, int line) {
  gaacrt_cuda_emu::Slot s{};
  s.in[0] = pred != 0;
  gaacrt_cuda_emu::warp_collective(&gaacrt_cuda_emu::resolve_ballot, mask, s, file, line);
  return s.out[0];
}

struct CUgraph_emu {
  std::vector<std::function<cudaError_t()>> work;
};
struct CUstream_emu {
  CUgraph_emu* capture = nullptr;
};

namespace {

thread_local cudaError_t g_last = cudaSuccess;
thread_local std::string g_last_msg;
thread_local int g_device = 0;

cudaError_t fail(cudaError_t e, const std::string& msg) {
  g_last = e;
  g_last_msg = "cuda-emulated: " + msg;
  return e;
}

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

// Streams run work as it arrives; a capturing stream records it instead.
cudaError_t enqueue(cudaStream_t s, std::function<cudaError_t()> work) {
  if (s && s->capture) {
    s->capture->work.push_back(std::move(work));
    return cudaSuccess;
  }
  return work();
}

}  // namespace

namespace gaacrt_cuda_emu {

// Device allocations carry a red zone of kRedZone canary bytes after their end, checked after
// every kernel: a kernel that wrote past an allocation fails with the allocation named (on a GPU
// the write would land in a neighbouring buffer, or fault).
namespace {
constexpr size_t kRedZone = 4096;
constexpr uint8_t kCanary = 0xA5;
std::mutex g_alloc_mu;
std::map<uintptr_t, size_t>& allocations() {
  static std::map<uintptr_t, size_t> m;
  return m;
}
}  // namespace

void* guarded_alloc(size_t bytes) {
  const size_t body = (bytes + 255) / 256 * 256;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(256, body + kRedZone));
  if (!p) return nullptr;
  std::memset(p + bytes, kCanary, body + kRedZone - bytes);
  std::lock_guard<std::mutex> lk(g_alloc_mu);
  allocations()[(uintptr_t)p] = bytes;
  return p;
}
void guarded_free(void* p) {
  if (!p) return;
  {
    std::lock_guard<std::mutex> lk(g_alloc_mu);
    allocations().erase((uintptr_t)p);
  }
  std::free(p);
}
// The first allocation whose red zone was written ("" when none).
std::string check_red_zones() {
  std::lock_guard<std::mutex> lk(g_alloc_mu);
  for (const auto& [base, bytes] : allocations()) {
    static const std::vector<uint8_t> canary(kRedZone + 256, kCanary);
    const uint8_t* p = reinterpret_cast<const uint8_t*>(base);
    const size_t n = (bytes + 255) / 256 * 256 + kRedZone - bytes;
    if (std::memcmp(p + bytes, canary.data(), n) != 0) {
      size_t i = bytes;
      while (p[i] == kCanary) ++i;
      return "wrote past the end of a device allocation of " + std::to_string(bytes) + " bytes (byte " +
             std::to_string(i) + ")";
    }
  }
  return "";
}

// SMs of the emulated device (GAACRT_CUDA_EMU_SMS, default 4): the launchers size split-K grids
// by it, and a small count keeps the emulated grids small.
int sm_count() { return env_int("GAACRT_CUDA_EMU_SMS", 4); }

cudaError_t func_attr(const void* kernel, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || (size_t)value > kOptinSmem)
      return fail(cudaErrorInvalidValue, "dynamic shared memory attribute " + std::to_string(value) + " above the opt-in limit");
    std::lock_guard<std::mutex> lk(g_attr_mu);
    smem_limits()[kernel] = (size_t)value;
  }
  return cudaSuccess;
}

cudaError_t launch(const void* kernel, const char* signature, dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                   std::function<void()> body) {
  return enqueue(s, [=]() -> cudaError_t {
    try {
      run_grid(kernel, signature, grid, block, smem, body);
    } catch (const Fault& f) {
      return fail(cudaErrorLaunchFailure, f.what());
    }
    const std::string bad = check_red_zones();
    if (!bad.empty()) return fail(cudaErrorLaunchFailure, "kernel '" + kernel_name(kernel, signature) + "' " + bad);
    return cudaSuccess;
  });
}

}  // namespace gaacrt_cuda_emu

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "invalid device ordinal " + std::to_string(device));
  g_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = g_device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "invalid device ordinal " + std::to_string(device));
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "CUDA emulation on the CPU (sm_90 semantics, %d SMs)", gaacrt_cuda_emu::sm_count());
  p->totalGlobalMem = (size_t)16 << 30;
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = gaacrt_cuda_emu::sm_count();
  p->sharedMemPerBlockOptin = gaacrt_cuda_emu::kOptinSmem;
  p->sharedMemPerMultiprocessor = gaacrt_cuda_emu::kSmemPerSm;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "invalid device ordinal " + std::to_string(device));
  switch (attr) {
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = (int)gaacrt_cuda_emu::kOptinSmem; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *v = (int)gaacrt_cuda_emu::kSmemPerSm; break;
    case cudaDevAttrMultiProcessorCount: *v = gaacrt_cuda_emu::sm_count(); break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    default: return fail(cudaErrorInvalidValue, "device attribute " + std::to_string((int)attr) + " not emulated");
  }
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return g_last; }
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorLaunchFailure: return g_last_msg.empty() ? "unspecified launch failure" : g_last_msg.c_str();
    default: return g_last_msg.empty() ? "cuda-emulated error" : g_last_msg.c_str();
  }
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = gaacrt_cuda_emu::guarded_alloc(bytes);
  return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation, "out of memory");
}
cudaError_t cudaFree(void* p) {
  gaacrt_cuda_emu::guarded_free(p);
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned) { return cudaMalloc(p, bytes); }
cudaError_t cudaFreeHost(void* p) { return cudaFree(p); }
cudaError_t cudaHostGetDevicePointer(void** d, void* h, unsigned) {
  *d = h;
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
  return enqueue(s, [=]() { return cudaMemcpy(dst, src, bytes, kind); });
}
cudaError_t cudaMemset(void* dst, int v, size_t bytes) {
  if (bytes) std::memset(dst, v, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int v, size_t bytes, cudaStream_t s) {
  return enqueue(s, [=]() { return cudaMemset(dst, v, bytes); });
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = new CUstream_emu;
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s) delete s->capture;
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (s && s->capture) return fail(cudaErrorStreamCaptureInvalidated, "cudaStreamSynchronize on a capturing stream");
  return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  if (!s || s->capture) return fail(cudaErrorInvalidValue, "stream capture on the default or a capturing stream");
  s->capture = new CUgraph_emu;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g) {
  if (!s || !s->capture) return fail(cudaErrorInvalidValue, "cudaStreamEndCapture without a capture");
  *g = s->capture;
  s->capture = nullptr;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t g, unsigned long long) {
  *exec = new CUgraph_emu(*g);
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete g;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
  return enqueue(s, [e]() {
    for (const auto& w : e->work)
      if (const cudaError_t r = w(); r != cudaSuccess) return r;
    return cudaSuccess;
  });
}
