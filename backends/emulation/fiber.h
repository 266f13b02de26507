// fiber.h — minimal user-space context switching for the kernel emulations (backends/metal/emulation,
// backends/cuda/emulation).
//
// A threadgroup's lanes run as fibers on one OS thread, so that threadgroup_barrier and the SIMD
// group functions can stop a lane and run the others until all have arrived, as on the GPU. A
// fiber here is a stack plus a saved stack pointer; switching saves the callee-saved registers on
// the old stack and restores them from the new one (a few nanoseconds, no system call — ucontext's
// swapcontext costs a sigprocmask per switch, and a whole-model decode step switches millions of
// times). x86-64 (System V) and aarch64 (AAPCS64, Linux and macOS) have hand-written switches;
// other targets fall back to ucontext.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gaacrt_emu {

// A fiber's entry point; it must never return (it switches back to its scheduler when done).
using FiberEntry = void (*)(void* arg);

struct FiberContext {
  void* sp = nullptr;     // saved stack pointer (hand-written switch)
  void* impl = nullptr;   // ucontext_t when the fallback is in use
};

// A stack for fibers: mmap'd with a guard page below it, so an overflow faults instead of
// silently corrupting the next fiber's stack.
class FiberStack {
 public:
  explicit FiberStack(size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  void* top() const { return top_; }
  size_t size() const { return usable_; }

 private:
  void* base_ = nullptr;
  size_t mapped_ = 0, usable_ = 0;
  void* top_ = nullptr;
};

// Prepares `ctx` so that the first switch to it runs entry(arg) on `stack`.
void fiber_init(FiberContext& ctx, const FiberStack& stack, FiberEntry entry, void* arg);
// Saves the current context in `from` and resumes `to`.
void fiber_switch(FiberContext& from, FiberContext& to);
// Frees what fiber_init allocated for the fallback (no-op for the hand-written switches).
void fiber_release(FiberContext& ctx);
// "x86-64 asm", "aarch64 asm" or "ucontext": which switch this build uses (reported by the tests).
const char* fiber_switch_kind();

}  // namespace gaacrt_emu
