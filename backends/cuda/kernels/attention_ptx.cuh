// attention_ptx.cuh — the sm_80+ PTX pieces of the tensor-core attention kernels
// (attention_mma.cuh, attention_e8_mma.cuh): cp.async copies, ldmatrix, mma.sync (m16n8k16 bf16
// or fp16 in, fp32 accumulate; m16n8k32 int8 in, int32 accumulate), and the exact three-way
// split of an fp32 value into bf16 parts.
//
// Why split: the tensor cores multiply bf16 by bf16. K and V are bf16 already (the cache stores
// them so), but q and the softmax weights p are fp32. Rounding them to bf16 would cost 8 bits of
// every score (relative error 2^-9, far above the CPU reference's 1e-5). x = hi + mid + lo with
// each part the bf16 rounding of what is left is exact to fp32's 24 bits, and bf16 x bf16
// products are exact in the fp32 accumulator, so three products give the fp32 q·k. The kernel
// puts the three parts in different rows of the 16-row A operand (rows are free: a GQA group of
// 4 heads fills only 4 of them), so the split costs no extra mma.
#pragma once
#include <cuda_bf16.h>
#include <cstdint>

namespace gaacrt::cuda::attn {

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// 16-byte asynchronous copy global -> shared; src_bytes 0 fills the destination with zeros.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, uint32_t src_bytes) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::cp_async(dst, src, 16, src_bytes);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(src_bytes)
               : "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::cp_async_wait(N);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
// Commits this thread's outstanding cp.async copies as a group and waits for all of them.
__device__ __forceinline__ void cp_async_wait_all() {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::cp_async_commit();
  gaacrt_cuda_emu::cp_async_wait(0);
#else
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void prefetch_l2(const void* p) {
#if !defined(GAACRT_CUDA_EMULATION)
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
#endif
}

// ---- bulk copies (sm_90: the TMA unit) ---------------------------------------------------------
// 16-byte cp.async requests go through the SM's L1 miss path, which tracks a limited number of
// outstanding requests: with every warp streaming KV that way the BF16 kernel stayed near 3 TB/s
// whatever else changed. A bulk copy is one instruction for a whole row or slot, carried out by
// the copy engine straight into shared memory; completion is counted in bytes on an mbarrier (one
// per pipeline stage of a warp), which the warp waits on by phase parity.
// The CUDA emulation (emulation/cuda_emu.h) runs the sm_90 path.
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || defined(GAACRT_CUDA_EMULATION)
#define GAACRT_BULK_COPY 1
#else
#define GAACRT_BULK_COPY 0
#endif
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::mbar_init(bar, 1);
#elif GAACRT_BULK_COPY
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(bar)) : "memory");
#endif
}
// A barrier whose phase takes `count` arrivals (each with the bytes it expects) and their bytes.
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::mbar_init(bar, count);
#elif GAACRT_BULK_COPY
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void mbar_inval(uint64_t* bar) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::mbar_inval(bar);
#elif GAACRT_BULK_COPY
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
#endif
}
// Makes barrier initialization visible to the copy engine.
__device__ __forceinline__ void fence_mbar_init() {
#if GAACRT_BULK_COPY && !defined(GAACRT_CUDA_EMULATION)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// Orders this thread's earlier ordinary shared-memory accesses before later bulk copies' writes.
__device__ __forceinline__ void fence_proxy_async() {
#if GAACRT_BULK_COPY && !defined(GAACRT_CUDA_EMULATION)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// The arrival of this stage's phase, which then also waits for `bytes` of bulk copies.
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::mbar_expect_tx(bar, bytes);
#elif GAACRT_BULK_COPY
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
#endif
}
// dst, src 16-byte aligned, bytes a multiple of 16.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::bulk_copy(dst, src, bytes, bar);
#elif GAACRT_BULK_COPY
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::mbar_wait(bar, parity, __FILE__, __LINE__);
#elif GAACRT_BULK_COPY
  asm volatile(
      "{\n .reg .pred done;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT_%=;\n}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
#endif
}

// Four 8x8 bf16 matrices; thread t gives the row address of matrix t/8, row t%8, and receives
// element pair (row t/4, cols 2(t%4), +1) of each (transposed with .trans).
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* p) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::ldmatrix_x4(r, p, false, __FILE__, __LINE__);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p))
               : "memory");
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void* p) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::ldmatrix_x4(r, p, true, __FILE__, __LINE__);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p))
               : "memory");
#endif
}

// The transpose of an 8x8 matrix of 16-bit values held as thread t's element pair (row t/4, cols
// 2(t%4), +1): an mma's accumulator layout in, a B operand's out (sm_75+).
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
#if defined(GAACRT_CUDA_EMULATION)
  return gaacrt_cuda_emu::movmatrix_trans(x, __FILE__, __LINE__);
#else
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
#endif
}

// D = A(16x16, row) * B(16x8, col) + D, bf16 inputs, fp32 accumulators. Fragments (g = lane/4,
// c = 2*(lane%4)): a0 (row g, cols c,c+1), a1 (row g+8), a2 (row g, cols c+8,c+9), a3 (row g+8,
// cols c+8); b0 (k c,c+1; n g), b1 (k c+8,c+9; n g); d0,d1 (row g, cols c,c+1), d2,d3 (row g+8).
__device__ __forceinline__ void mma_bf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::mma_bf16(d, a, b0, b1, false, __FILE__, __LINE__);
#else
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// As mma_bf16, with fp16 inputs.
__device__ __forceinline__ void mma_f16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::mma_bf16(d, a, b0, b1, true, __FILE__, __LINE__);
#else
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// D = A(16 x 32, row) · B(32 x 8, col) + D, s8 -> s32 (exact). The registers are laid out as
// mma_bf16's with 4 int8 in place of 2 bf16: a0 (row g, k 4c..4c+3), a1 (row g + 8),
// a2 (row g, k 16 + 4c..), a3 (row g + 8, k 16 + 4c..); b0 (k 4c.., n g), b1 (k 16 + 4c.., n g).
__device__ __forceinline__ void mma_s8_k32(int d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::mma_s8(d, a, b0, b1, 32, false, __FILE__, __LINE__);
#else
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}
// The k = 16 form: a0 (row g, k 4c..), a1 (row g + 8); b0 (k 4c.., n g).
__device__ __forceinline__ void mma_s8_k16(int d[4], uint32_t a0, uint32_t a1, uint32_t b0) {
#if defined(GAACRT_CUDA_EMULATION)
  const uint32_t a[2] = {a0, a1};
  gaacrt_cuda_emu::mma_s8(d, a, b0, 0u, 16, false, __FILE__, __LINE__);
#else
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
#endif
}
// The same two with B unsigned (Q16's low bytes).
__device__ __forceinline__ void mma_s8u8_k32(int d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if defined(GAACRT_CUDA_EMULATION)
  gaacrt_cuda_emu::mma_s8(d, a, b0, b1, 32, true, __FILE__, __LINE__);
#else
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}
__device__ __forceinline__ void mma_s8u8_k16(int d[4], uint32_t a0, uint32_t a1, uint32_t b0) {
#if defined(GAACRT_CUDA_EMULATION)
  const uint32_t a[2] = {a0, a1};
  gaacrt_cuda_emu::mma_s8(d, a, b0, 0u, 16, true, __FILE__, __LINE__);
#else
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
#endif
}

// Two floats rounded to nearest bf16 in one word (x0 in the low half), and back.
__device__ __forceinline__ uint32_t pack_bf16x2(float x0, float x1) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }
// What rounding x0, x1 to the bf16 pair hi left (exact in fp32), itself rounded to a bf16 pair:
// hi and this are two parts of 16 significant bits.
__device__ __forceinline__ uint32_t bf16_rest(float x0, float x1, uint32_t hi) {
  return pack_bf16x2(x0 - bf16_lo(hi), x1 - bf16_hi(hi));
}

// x = hi + mid + lo (each a bf16 pair): every difference below is exact in fp32, and three
// bf16 parts carry 24 significant bits, so the split loses nothing a float has.
struct Split3 {
  uint32_t hi, mid, lo;
};
__device__ __forceinline__ Split3 split3(float x0, float x1) {
  Split3 s;
  s.hi = pack_bf16x2(x0, x1);
  const float r0 = x0 - bf16_lo(s.hi), r1 = x1 - bf16_hi(s.hi);
  s.mid = pack_bf16x2(r0, r1);
  s.lo = bf16_rest(r0, r1, s.mid);
  return s;
}

}  // namespace gaacrt::cuda::attn
