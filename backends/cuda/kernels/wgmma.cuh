// wgmma.cuh — Hopper's warpgroup matrix multiply (PTX `wgmma.mma_async`, sm_90a only): the few
// shapes the prefill attention of attention_wide.cuh (wg_block_math) issues, with A (queries,
// softmax weights) in registers and B (K, V) in shared memory read through a matrix descriptor,
// fp32 accumulators.
//
// One wgmma is issued by the four warps of a warpgroup together (".sync.aligned": all 128 threads
// execute it, with the same descriptor) and multiplies a 64-row A by B: warp w holds rows
// 16w .. 16w+15 of A and of the accumulators in exactly the fragments of mma.sync.m16n8k16
// (attention_ptx.cuh), so the kernels' fragment code serves both. It runs asynchronously:
// wgmma_fence() before a batch (registers written since are seen), wgmma_commit() after it,
// wgmma_wait<0>() before its accumulators are read. Against four warps' mma.sync it moves no B
// fragment through registers (no ldmatrix) and issues one instruction per 64 x N x 16 product.
//
// B without swizzle ("interleave" mode, PTX ISA "Shared Memory Matrix Layout"): 8 x 8 bf16 core
// matrices of 128 contiguous bytes (8 rows of 16 bytes). K-major (q·k: B = K^T, the 16 bytes run
// along the channels): LBO is the step between core matrices along K (channels), SBO along N
// (keys). MN-major (p·v, imm-trans-b = 1: B = V, the 16 bytes run along N = channels): LBO steps
// along K (keys), SBO along N (channels). attention_tiles.cuh issue_bf16_step_tile lays a step's K
// and V out so that both read the same bytes.
#pragma once
#include <cstdint>
#include <cstring>

#include "attention_ptx.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GAACRT_WGMMA_ASM 1
#else
#define GAACRT_WGMMA_ASM 0
#endif

namespace gaacrt::cuda::attn {

// A shared-memory matrix descriptor without swizzle: the start address, LBO and SBO in bytes
// (16-byte multiples, each stored >> 4 in 14 bits). (The emulation's address: the offset into the
// block's dynamic shared memory.)
__device__ __forceinline__ uint64_t wg_desc(const void* p, uint32_t lbo, uint32_t sbo) {
#if defined(GAACRT_CUDA_EMULATION)
  const uint64_t a = (((uintptr_t)p - (uintptr_t)gaacrt_cuda_emu::dynamic_smem()) & 0x3FFFFu) >> 4;
#else
  const uint64_t a = (smem_u32(p) & 0x3FFFFu) >> 4;
#endif
  return a | ((uint64_t)((lbo & 0x3FFFFu) >> 4) << 16) | ((uint64_t)((sbo & 0x3FFFFu) >> 4) << 32);
}

#if defined(GAACRT_CUDA_EMULATION)
// The emulation of a wgmma: each warp's rows as m16n8k16 products (mma_bf16, which the emulation
// resolves per warp), one per 8 columns, each lane's B fragment read from shared memory where the
// descriptor puts element (k, n): K-major at (n % 8) 16 + (n / 8) SBO + (k % 8) 2 + (k / 8) LBO,
// MN-major (kTrans) at (n % 8) 2 + (n / 8) SBO + (k % 8) 16 + (k / 8) LBO (the PTX ISA's canonical
// layouts without swizzle; bench/wgmma_layout_probe.cu checked both on an H100). Synchronous: the
// results are there at the call, so a missing wgmma_wait goes unseen here.
template <bool kTrans>
inline void wg_emulate(float* const* d, int n8, const uint32_t (&a)[4], uint64_t desc, bool acc) {
  const uint8_t* base = gaacrt_cuda_emu::dynamic_smem() + ((desc & 0x3FFFu) << 4);
  const uint32_t lbo = (uint32_t)((desc >> 16) & 0x3FFFu) << 4, sbo = (uint32_t)((desc >> 32) & 0x3FFFu) << 4;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  auto el = [&](int k, int n) -> uint32_t {
    const uint32_t off = kTrans ? (n % 8) * 2 + (n / 8) * sbo + (k % 8) * 16 + (k / 8) * lbo
                                : (n % 8) * 16 + (n / 8) * sbo + (k % 8) * 2 + (k / 8) * lbo;
    uint16_t v;
    std::memcpy(&v, base + off, 2);
    return v;
  };
  for (int j = 0; j < n8; ++j) {  // the mma's B fragment: {B[2t][n], B[2t+1][n]}, {B[2t+8][n], B[2t+9][n]}
    const int n = 8 * j + g;
    const uint32_t b0 = el(2 * t, n) | el(2 * t + 1, n) << 16, b1 = el(2 * t + 8, n) | el(2 * t + 9, n) << 16;
    if (!acc)
      for (int x = 0; x < 4; ++x) d[j][x] = 0.f;  // scale-d 0: D = A B
    mma_bf16(d[j], a, b0, b1);
  }
}
#endif

__device__ __forceinline__ void wgmma_fence() {
#if GAACRT_WGMMA_ASM
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if GAACRT_WGMMA_ASM
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if GAACRT_WGMMA_ASM
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving reads or writes of an accumulator across the asynchronous
// window (between the wgmma that names it and the wait): it sees the value change here.
__device__ __forceinline__ void wg_pin(float (&d)[4]) {
#if !defined(GAACRT_CUDA_EMULATION)
  asm volatile("" : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])::"memory");
#endif
}

// d (+)= a · B for 64 rows x 16 columns (two 8-column fragments d0, d1), B K-major.
__device__ __forceinline__ void wgmma_n16(float (&d0)[4], float (&d1)[4], const uint32_t (&a)[4], uint64_t desc,
                                          bool acc) {
#if GAACRT_WGMMA_ASM
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
      : "+f"(d0[0]), "+f"(d0[1]), "+f"(d0[2]), "+f"(d0[3]), "+f"(d1[0]), "+f"(d1[1]), "+f"(d1[2]), "+f"(d1[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"((int)acc));
#elif defined(GAACRT_CUDA_EMULATION)
  float* const d[2] = {d0, d1};
  wg_emulate<false>(d, 2, a, desc, acc);
#endif
}

// d (+)= a · B for 64 rows x 32 columns (fragments d0 .. d3), B K-major.
__device__ __forceinline__ void wgmma_n32(float (&d0)[4], float (&d1)[4], float (&d2)[4], float (&d3)[4],
                                          const uint32_t (&a)[4], uint64_t desc, bool acc) {
#if GAACRT_WGMMA_ASM
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, "
      "1, 0;\n}\n"
      : "+f"(d0[0]), "+f"(d0[1]), "+f"(d0[2]), "+f"(d0[3]), "+f"(d1[0]), "+f"(d1[1]), "+f"(d1[2]), "+f"(d1[3]),
        "+f"(d2[0]), "+f"(d2[1]), "+f"(d2[2]), "+f"(d2[3]), "+f"(d3[0]), "+f"(d3[1]), "+f"(d3[2]), "+f"(d3[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"((int)acc));
#elif defined(GAACRT_CUDA_EMULATION)
  float* const d[4] = {d0, d1, d2, d3};
  wg_emulate<false>(d, 4, a, desc, acc);
#endif
}

// d (+)= a · B for 64 rows x 64 columns (fragments d[0] .. d[7]): B K-major (q·k of a four-block
// step), or MN-major with kTrans (imm-trans-b = 1: p·v, B = V).
template <bool kTrans>
__device__ __forceinline__ void wgmma_n64(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc, bool acc) {
#if GAACRT_WGMMA_ASM
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
      "%23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"((int)acc), "n"(kTrans ? 1 : 0));
#elif defined(GAACRT_CUDA_EMULATION)
  float* const dd[8] = {d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]};
  wg_emulate<kTrans>(dd, 8, a, desc, acc);
#endif
}

}  // namespace gaacrt::cuda::attn
