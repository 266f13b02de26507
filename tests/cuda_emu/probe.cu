// probe.cu — pins down the CUDA emulation's semantics (backends/cuda/emulation/cuda_emu.h), run by
// tests/test_cuda_emulation.py: compiled as C++ with the emulation's flags (the build in that test),
// launched through the emulated runtime. Prints a line per check, then "N passed, M failed".
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda_common.h"
#include "cuda/kernels/attention_ptx.cuh"
#include "cuda/kernels/entry_stream.cuh"

using namespace gaacrt::cuda::attn;

namespace {

int g_pass = 0, g_fail = 0;
void check(bool ok, const char* what, const std::string& detail = "") {
  std::printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what, detail.empty() ? "" : ": ", detail.c_str());
  (ok ? g_pass : g_fail)++;
}

// An mma.sync m16n8 accumulator as the PTX ISA lays it out: lane l's d[x], element i = 4 l + x,
// holds (row, col) of the 16x8 C. for_each_accumulator(f) calls f(i, row, col) for all 128.
template <typename F>
void for_each_accumulator(F f) {
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, c = 2 * (l % 4);
    const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {c, c + 1, c, c + 1};
    for (int x = 0; x < 4; ++x) f(4 * l + x, rows[x], cols[x]);
  }
}

template <typename K, typename... A>
cudaError_t launch(K kernel, unsigned grid, unsigned block, size_t smem, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.dynamicSmemBytes = smem;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}

// Shuffles (xor, up with a width, idx), a ballot and any.
__global__ void k_warp(int* out) {
  const int lane = threadIdx.x & 31;
  out[lane] = __shfl_xor_sync(0xFFFFFFFFu, lane * 10, 5);
  out[32 + lane] = __shfl_up_sync(0xFFFFFFFFu, lane, 3, 8);
  out[64 + lane] = (int)__ballot_sync(0xFFFFFFFFu, lane % 3 == 0);
  out[96 + lane] = __shfl_sync(0xFFFFFFFFu, lane * lane, 7);
  out[128 + lane] = __any_sync(0xFFFFFFFFu, lane == 17);
}

// Half the warp shuffles among itself while the other half takes a different path to a full
// __syncwarp: collectives with other masks are met separately.
__global__ void k_half_masks(int* out) {
  const int lane = threadIdx.x & 31;
  int v = lane;
  if (lane < 16) v = __shfl_xor_sync(0x0000FFFFu, v, 1);
  __syncwarp();
  out[lane] = v;
}

// A shuffle whose lanes wait at two different calls: an error naming the sites.
__global__ void k_divergent(int* out) {
  const int lane = threadIdx.x & 31;
  int v;
  if (lane & 1) v = __shfl_xor_sync(0xFFFFFFFFu, lane, 1);
  else v = __shfl_xor_sync(0xFFFFFFFFu, lane, 2);
  out[lane] = v;
}

// A wait on an mbarrier no thread arrives at: no thread can move.
__global__ void k_mbar_never(int* out) {
  GAACRT_DYNAMIC_SMEM(smem);
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem);
  if (threadIdx.x == 0) mbar_init(bar);
  __syncthreads();
  mbar_wait(bar, 0);
  out[threadIdx.x] = 1;
}

// A cp.async read before its wait sees the destination as it was (0xFF: dynamic shared memory's
// fill), after the wait the copied bytes; __syncthreads_count counts.
__global__ void k_cp_async(const uint4* src, uint32_t* out) {
  GAACRT_DYNAMIC_SMEM(smem);
  uint4* s = reinterpret_cast<uint4*>(smem);
  const int t = threadIdx.x;
  cp_async16(s + t, src + t, 16);
  gaacrt::cuda::EntryStream<1>::commit_group();
  out[t] = s[t].x;  // before the wait
  cp_async_wait<0>();
  out[64 + t] = s[t].x;
  out[128 + t] = __syncthreads_count(t % 4 == 0);
}

// A bulk copy lands when a thread waits on its mbarrier, then the phase flips.
__global__ void k_bulk(const uint4* src, uint32_t* out) {
  GAACRT_DYNAMIC_SMEM(smem);
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem);
  uint4* s = reinterpret_cast<uint4*>(smem + 16);
  const int lane = threadIdx.x;
  if (lane == 0) {
    mbar_init(bar);
    mbar_expect_tx(bar, 64 * 16);
    bulk_copy(s, src, 64 * 16, bar);
  }
  __syncwarp();
  mbar_wait(bar, 0);
  out[lane] = s[lane].y + s[32 + lane].y;
  __syncwarp();
  if (lane == 0) mbar_inval(bar);
}

// A write one element past the buffer: the red zone names it.
__global__ void k_overflow(float* y, int n) {
  for (int i = threadIdx.x; i <= n; i += blockDim.x) y[i] = 1.f;
}

// ldmatrix and mma.sync (bf16): a 16x16 A times a 16x8 B, A from registers, B by ldmatrix.trans
// of a row-major 16x8 tile padded to 16 columns.
__global__ void k_mma(const uint32_t* a_frag, const uint16_t* b_rows, float* d_out) {
  GAACRT_DYNAMIC_SMEM(smem);
  uint16_t* bt = reinterpret_cast<uint16_t*>(smem);
  const int lane = threadIdx.x;
  for (int i = lane; i < 16 * 16; i += 32) bt[i] = b_rows[i];
  __syncwarp();
  uint32_t a[4], r[4];
  for (int i = 0; i < 4; ++i) a[i] = a_frag[4 * lane + i];
  const int mi = lane >> 3, ri = lane & 7;
  ldmatrix_x4_trans(r, bt + (8 * (mi & 1) + ri) * 16 + 8 * (mi >> 1));
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  mma_bf16(d, a, r[0], r[1]);
  for (int i = 0; i < 4; ++i) d_out[4 * lane + i] = d[i];
}

// mma.sync with int8 A and signed or unsigned int8 B (m16n8k32 and m16n8k16) onto an int32 C:
// lane l's ten words are its A registers (four at k32, two at k16, the rest unused), B registers
// (two, one) and C, laid out as the PTX ISA draws them.
template <int K, bool kUnsignedB>
__global__ void k_mma8(const uint32_t* frag, int* d_out) {
  const uint32_t* f = frag + 10 * threadIdx.x;
  int d[4] = {(int)f[6], (int)f[7], (int)f[8], (int)f[9]};
  const uint32_t a[4] = {f[0], f[1], f[2], f[3]};
  if (K == 32 && kUnsignedB) mma_s8u8_k32(d, a, f[4], f[5]);
  if (K == 32 && !kUnsignedB) mma_s8_k32(d, a, f[4], f[5]);
  if (K == 16 && kUnsignedB) mma_s8u8_k16(d, f[0], f[1], f[4]);
  if (K == 16 && !kUnsignedB) mma_s8_k16(d, f[0], f[1], f[4]);
  for (int i = 0; i < 4; ++i) d_out[4 * threadIdx.x + i] = d[i];
}

// movmatrix.trans: lane t holds (row t/4, cols 2(t%4), +1) of an 8x8 matrix of 16-bit values and
// receives the same positions of its transpose (the decode attention's P^T, attention_block.cuh).
__global__ void k_movmatrix(const uint32_t* in, uint32_t* out) {
  out[threadIdx.x] = movmatrix_trans(in[threadIdx.x]);
}

uint16_t bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

}  // namespace

int main() {
  int* io = nullptr;
  cudaMalloc(&io, 4096);

  check(launch(k_warp, 1, 32, 0, io) == cudaSuccess, "warp functions launch");
  {
    bool ok = true;
    for (int l = 0; l < 32; ++l) {
      ok &= io[l] == (l ^ 5) * 10;
      ok &= io[32 + l] == ((l % 8) >= 3 ? l - 3 : l);
      ok &= io[64 + l] == (int)0x49249249u;
      ok &= io[96 + l] == 49;
      ok &= io[128 + l] == 1;
    }
    check(ok, "xor / up-with-width / idx shuffles, ballot, any");
  }
  check(launch(k_half_masks, 1, 32, 0, io) == cudaSuccess, "a half-warp shuffle beside a full __syncwarp");
  {
    bool ok = true;
    for (int l = 0; l < 32; ++l) ok &= io[l] == (l < 16 ? (l ^ 1) : l);
    check(ok, "the half-warp shuffle's values");
  }
  {
    const cudaError_t e = launch(k_divergent, 1, 32, 0, io);
    const std::string msg = cudaGetErrorString(e);
    cudaGetLastError();
    check(e == cudaErrorLaunchFailure && msg.find("no thread can move") != std::string::npos &&
              msg.find("probe.cu") != std::string::npos,
          "a divergent shuffle is reported with its sites", msg);
  }
  {
    const cudaError_t e = launch(k_mbar_never, 1, 64, 16, io);
    const std::string msg = cudaGetErrorString(e);
    cudaGetLastError();
    check(e == cudaErrorLaunchFailure && msg.find("spin-wait") != std::string::npos,
          "a wait on an mbarrier nothing completes is reported", msg);
  }
  {
    std::vector<uint4> host(64);
    for (int i = 0; i < 64; ++i) host[i] = make_uint4(1000 + i, 2000 + i, 0, 0);
    uint4* src = nullptr;
    cudaMalloc(&src, 64 * 16);
    cudaMemcpy(src, host.data(), 64 * 16, cudaMemcpyHostToDevice);
    uint32_t* out = reinterpret_cast<uint32_t*>(io);
    check(launch(k_cp_async, 1, 64, 64 * 16, src, out) == cudaSuccess, "cp.async launch");
    bool before = true, after = true, count = true;
    for (int t = 0; t < 64; ++t) {
      before &= out[t] == 0xFFFFFFFFu;
      after &= out[64 + t] == 1000u + t;
      count &= out[128 + t] == 16;
    }
    check(before, "cp.async data is not there before its wait");
    check(after, "cp.async data is there after cp.async.wait_group");
    check(count, "__syncthreads_count");
    check(launch(k_bulk, 1, 32, 16 + 64 * 16, src, out) == cudaSuccess, "bulk copy launch");
    bool bulk = true;
    for (int l = 0; l < 32; ++l) bulk &= out[l] == (2000u + l) + (2000u + 32 + l);
    check(bulk, "a bulk copy lands at its mbarrier's wait");
    const cudaError_t e = launch(k_bulk, 1, 32, 100 * 1024, src, out);
    const std::string msg = cudaGetErrorString(e);
    cudaGetLastError();
    check(e == cudaErrorLaunchFailure && msg.find("MaxDynamicSharedMemorySize") != std::string::npos,
          "dynamic shared memory above the kernel's attribute is refused", msg);
    cudaFree(src);
  }
  {
    float* y = nullptr;
    cudaMalloc(&y, 100 * sizeof(float));
    const cudaError_t e = launch(k_overflow, 1, 32, 0, y, 100);
    const std::string msg = cudaGetErrorString(e);
    cudaGetLastError();
    check(e == cudaErrorLaunchFailure && msg.find("past the end of a device allocation of 400 bytes") != std::string::npos,
          "a write past an allocation is caught by its red zone", msg);
    cudaFree(y);
  }
  {
    // A[m][k] = (m + 1) * 0.5 - k * 0.25, B[k][n] = k - n (small integers and quarters: exact).
    float A[16][16], B[16][8];
    for (int m = 0; m < 16; ++m)
      for (int k = 0; k < 16; ++k) A[m][k] = (m + 1) * 0.5f - k * 0.25f;
    for (int k = 0; k < 16; ++k)
      for (int n = 0; n < 8; ++n) B[k][n] = (float)(k - n);
    std::vector<uint32_t> af(128);
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, c = 2 * (l % 4);
      auto pack = [&](int m, int k) { return (uint32_t)bf16(A[m][k]) | ((uint32_t)bf16(A[m][k + 1]) << 16); };
      af[4 * l] = pack(g, c), af[4 * l + 1] = pack(g + 8, c), af[4 * l + 2] = pack(g, c + 8), af[4 * l + 3] = pack(g + 8, c + 8);
    }
    std::vector<uint16_t> brows(256, 0);
    for (int k = 0; k < 16; ++k)
      for (int n = 0; n < 8; ++n) brows[k * 16 + n] = bf16(B[k][n]);
    uint32_t* da = nullptr;
    uint16_t* db = nullptr;
    float* dd = nullptr;
    cudaMalloc(&da, 512);
    cudaMalloc(&db, 512);
    cudaMalloc(&dd, 512);
    cudaMemcpy(da, af.data(), 512, cudaMemcpyHostToDevice);
    cudaMemcpy(db, brows.data(), 512, cudaMemcpyHostToDevice);
    check(launch(k_mma, 1, 32, 512, da, db, dd) == cudaSuccess, "ldmatrix + mma launch");
    bool ok = true;
    for_each_accumulator([&](int i, int row, int col) {
      float ref = 0.f;
      for (int k = 0; k < 16; ++k) ref += A[row][k] * B[k][col];
      ok &= dd[i] == ref;
    });
    check(ok, "mma.sync m16n8k16 with B by ldmatrix.trans gives A·B in the accumulator layout");
    cudaFree(da);
    cudaFree(db);
    cudaFree(dd);
  }
  {
    // Random bytes (an LCG); C near the int32 limits, so that the add onto C wraps as the tensor
    // cores' does. The reference sums in int64 from the matrices, not from the fragments.
    uint32_t seed = 12345u;
    auto rnd = [&] { return seed = seed * 1664525u + 1013904223u; };
    auto run = [&](auto kernel, int K, bool ub, const char* what) {
      int8_t A[16][32];
      int32_t B[32][8];
      uint32_t C[16][8];
      for (auto& row : A)
        for (int8_t& x : row) x = (int8_t)(rnd() >> 24);
      for (auto& row : B)
        for (int32_t& x : row) x = ub ? (int32_t)(rnd() >> 24) : (int32_t)(int8_t)(rnd() >> 24);
      for (auto& row : C)
        for (uint32_t& x : row) x = rnd() % 4 ? rnd() : 0x7FFFFFF0u;
      std::vector<uint32_t> frag(320, 0);
      auto bytes4 = [](auto at) {
        uint32_t w = 0;
        for (int i = 0; i < 4; ++i) w |= (uint32_t)(uint8_t)at(i) << (8 * i);
        return w;
      };
      for (int l = 0; l < 32; ++l) {
        const int g = l / 4, c = 4 * (l % 4);
        uint32_t* f = frag.data() + 10 * l;
        f[0] = bytes4([&](int i) { return A[g][c + i]; });
        f[1] = bytes4([&](int i) { return A[g + 8][c + i]; });
        f[2] = bytes4([&](int i) { return A[g][16 + c + i]; });
        f[3] = bytes4([&](int i) { return A[g + 8][16 + c + i]; });
        f[4] = bytes4([&](int i) { return B[c + i][g]; });
        f[5] = bytes4([&](int i) { return B[16 + c + i][g]; });
      }
      for_each_accumulator([&](int i, int row, int col) { frag[10 * (i / 4) + 6 + i % 4] = C[row][col]; });
      uint32_t* df = nullptr;
      int* dd = nullptr;
      cudaMalloc(&df, 1280);
      cudaMalloc(&dd, 512);
      cudaMemcpy(df, frag.data(), 1280, cudaMemcpyHostToDevice);
      const bool launched = launch(kernel, 1, 32, 0, (const uint32_t*)df, dd) == cudaSuccess;
      std::vector<int> d(128, 0);
      cudaMemcpy(d.data(), dd, 512, cudaMemcpyDeviceToHost);
      bool ok = launched;
      for_each_accumulator([&](int i, int row, int col) {
        int64_t sum = 0;
        for (int k = 0; k < K; ++k) sum += (int64_t)A[row][k] * B[k][col];
        ok &= (uint32_t)d[i] == C[row][col] + (uint32_t)sum;
      });
      check(ok, what);
      cudaFree(df);
      cudaFree(dd);
    };
    run(k_mma8<32, false>, 32, false, "int8 mma.sync m16n8k32 s8.s8 adds A·B onto C, wrapping");
    run(k_mma8<32, true>, 32, true, "int8 mma.sync m16n8k32 s8.u8 adds A·B onto C, wrapping");
    run(k_mma8<16, false>, 16, false, "int8 mma.sync m16n8k16 s8.s8 adds A·B onto C, wrapping");
    run(k_mma8<16, true>, 16, true, "int8 mma.sync m16n8k16 s8.u8 adds A·B onto C, wrapping");
  }
  {
    // M[r][c] = 16 r + c + 1: every element distinct.
    auto M = [](int r, int c) { return (uint32_t)(16 * r + c + 1); };
    std::vector<uint32_t> in(32), out(32, 0);
    for (int l = 0; l < 32; ++l) in[l] = M(l / 4, 2 * (l % 4)) | M(l / 4, 2 * (l % 4) + 1) << 16;
    uint32_t *din = nullptr, *dout = nullptr;
    cudaMalloc(&din, 128);
    cudaMalloc(&dout, 128);
    cudaMemcpy(din, in.data(), 128, cudaMemcpyHostToDevice);
    check(launch(k_movmatrix, 1, 32, 0, din, dout) == cudaSuccess, "movmatrix launch");
    cudaMemcpy(out.data(), dout, 128, cudaMemcpyDeviceToHost);
    bool ok = true;
    for (int l = 0; l < 32; ++l) ok &= out[l] == (M(2 * (l % 4), l / 4) | M(2 * (l % 4) + 1, l / 4) << 16);
    check(ok, "movmatrix.trans gives each lane its element pair of the transpose");
    cudaFree(din);
    cudaFree(dout);
  }
  cudaFree(io);
  std::printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
