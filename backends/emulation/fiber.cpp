// fiber.cpp — the context switches behind fiber.h: hand-written for x86-64 System V and
// aarch64 (AAPCS64), ucontext elsewhere.
//
// Hand-written switch: push the callee-saved registers (and the floating-point control words, so a
// lane cannot change another's rounding mode) on the current stack, store the stack pointer,
// load the other fiber's stack pointer, pop its registers, return into it. A new fiber's stack is
// laid out as if it had been switched away from just before a trampoline that calls entry(arg):
// entry and arg ride in callee-saved registers the trampoline moves into place.
#if defined(__APPLE__) && !defined(__aarch64__) && !defined(_XOPEN_SOURCE)
  #define _XOPEN_SOURCE 600  // macOS exposes the ucontext functions only with it
#endif
#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__)
  #define GAACRT_EMU_ASM_X64 1
#elif defined(__aarch64__) && (defined(__linux__) || defined(__APPLE__))
  #define GAACRT_EMU_ASM_A64 1
  #if defined(__APPLE__)
    #define GAACRT_EMU_SYM(name) "_" #name
  #else
    #define GAACRT_EMU_SYM(name) #name
  #endif
#else
  #include <ucontext.h>
  #define GAACRT_EMU_UCONTEXT 1
#endif

extern "C" {
void gaacrt_emu_switch(void** save_sp, void* new_sp);
void gaacrt_emu_fiber_start();
}

#if GAACRT_EMU_ASM_X64
// Frame (low to high): mxcsr (4 B), x87 control word (2 B, padded to 8), r15 r14 r13 r12 rbx rbp,
// return address. The trampoline gets arg in r12 and entry in r13.
asm(R"(
  .text
  .globl gaacrt_emu_switch
  .type gaacrt_emu_switch,@function
gaacrt_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size gaacrt_emu_switch,.-gaacrt_emu_switch

  .globl gaacrt_emu_fiber_start
  .type gaacrt_emu_fiber_start,@function
gaacrt_emu_fiber_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size gaacrt_emu_fiber_start,.-gaacrt_emu_fiber_start
)");
#elif GAACRT_EMU_ASM_A64
// Frame of 176 bytes: x19..x30 at 0..95, d8..d15 at 96..159, fpcr at 160. The trampoline gets
// arg in x19 and entry in x20; x30 (the return address) points at the trampoline.
asm(R"(
  .text
  .globl )" GAACRT_EMU_SYM(gaacrt_emu_switch) R"(
  .p2align 2
)" GAACRT_EMU_SYM(gaacrt_emu_switch) R"(:
  sub sp, sp, #176
  stp x19, x20, [sp, #0]
  stp x21, x22, [sp, #16]
  stp x23, x24, [sp, #32]
  stp x25, x26, [sp, #48]
  stp x27, x28, [sp, #64]
  stp x29, x30, [sp, #80]
  stp d8, d9, [sp, #96]
  stp d10, d11, [sp, #112]
  stp d12, d13, [sp, #128]
  stp d14, d15, [sp, #144]
  mrs x9, fpcr
  str x9, [sp, #160]
  mov x9, sp
  str x9, [x0]
  mov sp, x1
  ldr x9, [sp, #160]
  msr fpcr, x9
  ldp x19, x20, [sp, #0]
  ldp x21, x22, [sp, #16]
  ldp x23, x24, [sp, #32]
  ldp x25, x26, [sp, #48]
  ldp x27, x28, [sp, #64]
  ldp x29, x30, [sp, #80]
  ldp d8, d9, [sp, #96]
  ldp d10, d11, [sp, #112]
  ldp d12, d13, [sp, #128]
  ldp d14, d15, [sp, #144]
  add sp, sp, #176
  ret

  .globl )" GAACRT_EMU_SYM(gaacrt_emu_fiber_start) R"(
  .p2align 2
)" GAACRT_EMU_SYM(gaacrt_emu_fiber_start) R"(:
  mov x0, x19
  blr x20
  brk #0
)");
#endif

namespace gaacrt_emu {

FiberStack::FiberStack(size_t bytes) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  usable_ = (bytes + page - 1) / page * page;
  mapped_ = usable_ + page;
  base_ = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base_ == MAP_FAILED) {
    std::fprintf(stderr, "gaacrt_emu: cannot map a fiber stack of %zu bytes\n", mapped_);
    std::abort();
  }
  mprotect(base_, page, PROT_NONE);  // guard page: the stack grows down into it
  top_ = static_cast<uint8_t*>(base_) + mapped_;
}

FiberStack::~FiberStack() { munmap(base_, mapped_); }

#if GAACRT_EMU_UCONTEXT
namespace {
struct Start { FiberEntry entry; void* arg; };
void ucontext_start(unsigned lo, unsigned hi) {
  const Start* s = reinterpret_cast<const Start*>(((uintptr_t)hi << 32) | (uintptr_t)lo);
  s->entry(s->arg);
}
}  // namespace
#endif

void fiber_init(FiberContext& ctx, const FiberStack& stack, FiberEntry entry, void* arg) {
  uintptr_t top = reinterpret_cast<uintptr_t>(stack.top()) & ~(uintptr_t)15;
#if GAACRT_EMU_ASM_X64
  // 8 slots above sp: control words, r15, r14, r13 (entry), r12 (arg), rbx, rbp, return address.
  // After the switch pops them, rsp = sp + 64, 16-byte aligned for the trampoline's call.
  uint64_t* sp = reinterpret_cast<uint64_t*>(top - 16 - 64);
  std::memset(sp, 0, 64);
  const uint32_t mxcsr = 0x1F80;  // all exceptions masked, round to nearest
  const uint16_t fcw = 0x037F;    // x87 default
  std::memcpy(reinterpret_cast<uint8_t*>(sp), &mxcsr, 4);
  std::memcpy(reinterpret_cast<uint8_t*>(sp) + 4, &fcw, 2);
  sp[3] = reinterpret_cast<uint64_t>(entry);
  sp[4] = reinterpret_cast<uint64_t>(arg);
  sp[7] = reinterpret_cast<uint64_t>(&gaacrt_emu_fiber_start);
  ctx.sp = sp;
#elif GAACRT_EMU_ASM_A64
  uint64_t* sp = reinterpret_cast<uint64_t*>(top - 176);
  std::memset(sp, 0, 176);
  sp[0] = reinterpret_cast<uint64_t>(arg);     // x19
  sp[1] = reinterpret_cast<uint64_t>(entry);   // x20
  sp[11] = reinterpret_cast<uint64_t>(&gaacrt_emu_fiber_start);  // x30
  ctx.sp = sp;
#else
  ucontext_t* uc = static_cast<ucontext_t*>(ctx.impl ? ctx.impl : std::calloc(1, sizeof(ucontext_t) + sizeof(Start)));
  Start* s = reinterpret_cast<Start*>(uc + 1);
  s->entry = entry;
  s->arg = arg;
  getcontext(uc);
  uc->uc_stack.ss_sp = static_cast<uint8_t*>(stack.top()) - stack.size();
  uc->uc_stack.ss_size = stack.size();
  uc->uc_link = nullptr;
  const uintptr_t p = reinterpret_cast<uintptr_t>(s);
  makecontext(uc, reinterpret_cast<void (*)()>(&ucontext_start), 2, (unsigned)(p & 0xFFFFFFFFu), (unsigned)(p >> 32));
  ctx.impl = uc;
  (void)top;
#endif
}

void fiber_switch(FiberContext& from, FiberContext& to) {
#if GAACRT_EMU_UCONTEXT
  if (!from.impl) from.impl = std::calloc(1, sizeof(ucontext_t) + 16);
  swapcontext(static_cast<ucontext_t*>(from.impl), static_cast<ucontext_t*>(to.impl));
#else
  gaacrt_emu_switch(&from.sp, to.sp);
#endif
}

void fiber_release(FiberContext& ctx) {
  std::free(ctx.impl);
  ctx.impl = nullptr;
}

const char* fiber_switch_kind() {
#if GAACRT_EMU_ASM_X64
  return "x86-64 asm";
#elif GAACRT_EMU_ASM_A64
  return "aarch64 asm";
#else
  return "ucontext";
#endif
}

}  // namespace gaacrt_emu
