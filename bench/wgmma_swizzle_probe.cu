// wgmma_swizzle_probe.cu — for the next step of the prefill attention (bench/results/cuda_h200.md,
// nineteenth session, "Next"): K and V pages copied whole by TMA with 128-byte swizzle and read by
// wgmma as they lie. Before any kernel depends on it, this checks on an sm_90 GPU which matrix
// descriptors read such tiles right, against the same products on the host (small integers: exact).
//
// The layout assumed (what a TMA box of {64 channels, 16 keys} with CU_TENSOR_MAP_SWIZZLE_128B
// writes at a 1024-byte aligned address, blocks stacked 2 KiB apart): a 64-channel half of 64 keys
// is a region of 64 rows x 128 bytes; the 16-byte chunk c of row r sits at chunk position c ^ (r % 8)
// of that row. K's two halves and V's two halves are four such regions.
//   q·k (B = K^T, K-major): k-step kk starts 32 (kk % 4) bytes into half kk / 4, SBO 1024 (the next
//     8 keys), LBO unused for a swizzled K-major operand; layout type 1 (128-byte swizzle).
//   p·v (B = V, MN-major, 64 channels = one swizzle width): block i starts 2048 i bytes into a half;
//     which of LBO / SBO steps the 8-key groups is what the table below finds out.
//
//   nvcc -std=c++17 -arch=sm_90a -I backends/cuda -o /tmp/wgmma_swizzle bench/wgmma_swizzle_probe.cu && /tmp/wgmma_swizzle
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/wgmma.cuh"

using namespace gaacrt::cuda::attn;

constexpr int kKeys = 64, kD = 128, kRows = 64, kRegion = kKeys * 128;  // bytes of one 64-channel half
constexpr int kCand = 5;
__constant__ uint32_t kPvLbo[kCand] = {16, 1024, 1024, 8192, 2048};
__constant__ uint32_t kPvSbo[kCand] = {1024, 16, 1024, 1024, 1024};

__device__ uint64_t swz_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  return wg_desc(p, lbo, sbo) | (1ull << 62);  // layout type 1: 128-byte swizzle
}
__device__ uint32_t pack2(const __nv_bfloat16* p) {
  return (uint32_t)__bfloat16_as_ushort(p[0]) | ((uint32_t)__bfloat16_as_ushort(p[1]) << 16);
}

// q: [64][128], p: [64][64], k and v: [64][128] (bf16). qk: [64][64]; pv: [kCand][64][128].
__global__ void probe(const __nv_bfloat16* q, const __nv_bfloat16* p, const __nv_bfloat16* k, const __nv_bfloat16* v,
                      float* qk, float* pv) {
  __shared__ __align__(1024) uint8_t tile[4 * kRegion];  // K half 0, K half 1, V half 0, V half 1
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  for (int x = tid; x < kKeys * 16; x += 128) {  // row r, chunk c (8 channels) of 16
    const int r = x / 16, c = x % 16, half = c / 8, cc = c % 8;
    const int off = half * kRegion + r * 128 + 16 * (cc ^ (r % 8));
    *reinterpret_cast<uint4*>(tile + off) = *reinterpret_cast<const uint4*>(k + r * kD + 8 * c);
    *reinterpret_cast<uint4*>(tile + 2 * kRegion + off) = *reinterpret_cast<const uint4*>(v + r * kD + 8 * c);
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  auto afrag = [&](const __nv_bfloat16* m, int ld, int kk, uint32_t (&a)[4]) {  // mma.m16n8k16's A layout
    const int r0 = 16 * warp + g, c0 = 16 * kk + 2 * t;
    a[0] = pack2(m + r0 * ld + c0);
    a[1] = pack2(m + (r0 + 8) * ld + c0);
    a[2] = pack2(m + r0 * ld + c0 + 8);
    a[3] = pack2(m + (r0 + 8) * ld + c0 + 8);
  };
  auto put = [&](float* out, int ld, int j, const float (&d)[4]) {
    for (int e = 0; e < 4; ++e) out[(16 * warp + g + 8 * (e / 2)) * ld + 8 * j + 2 * t + e % 2] = d[e];
  };
  float s[8][4];
  wgmma_fence();
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t a[4];
    afrag(q, kD, kk, a);
    wgmma_n64<false>(s, a, swz_desc(tile + (kk / 4) * kRegion + 32 * (kk % 4), 16, 1024), kk > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();
  for (int j = 0; j < 8; ++j) put(qk, kKeys, j, s[j]);
  for (int cand = 0; cand < kCand; ++cand)
    for (int half = 0; half < 2; ++half) {
      float o[8][4];
      wgmma_fence();
      for (int i = 0; i < kKeys / 16; ++i) {
        uint32_t a[4];
        afrag(p, kKeys, i, a);
        wgmma_n64<true>(o, a, swz_desc(tile + (2 + half) * kRegion + 2048 * i, kPvLbo[cand], kPvSbo[cand]), i > 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      for (int j = 0; j < 8; ++j) put(pv + cand * kRows * kD, kD, 8 * half + j, o[j]);
    }
}

int main() {
  std::vector<float> q(kRows * kD), p(kRows * kKeys), k(kKeys * kD), v(kKeys * kD);
  unsigned x = 4242;
  auto rnd = [&] { x = x * 1103515245u + 12345u; return (float)((int)((x >> 16) % 7) - 3); };
  for (auto* vec : {&q, &p, &k, &v})
    for (float& f : *vec) f = rnd();
  auto upload = [](const std::vector<float>& f) {
    std::vector<__nv_bfloat16> b(f.size());
    for (size_t i = 0; i < f.size(); ++i) b[i] = __float2bfloat16(f[i]);
    __nv_bfloat16* d = nullptr;
    cudaMalloc(&d, b.size() * 2);
    cudaMemcpy(d, b.data(), b.size() * 2, cudaMemcpyHostToDevice);
    return d;
  };
  __nv_bfloat16 *dq = upload(q), *dp = upload(p), *dk = upload(k), *dv = upload(v);
  float *dqk, *dpv;
  cudaMalloc(&dqk, kRows * kKeys * 4);
  cudaMalloc(&dpv, kCand * kRows * kD * 4);
  probe<<<1, 128>>>(dq, dp, dk, dv, dqk, dpv);
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::printf("wgmma swizzle probe: %s\n", cudaGetErrorString(err));
    return 1;
  }
  std::vector<float> qk(kRows * kKeys), pv(kCand * kRows * kD);
  cudaMemcpy(qk.data(), dqk, qk.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(pv.data(), dpv, pv.size() * 4, cudaMemcpyDeviceToHost);
  double e_qk = 0;
  for (int r = 0; r < kRows; ++r)
    for (int j = 0; j < kKeys; ++j) {
      double ref = 0;
      for (int c = 0; c < kD; ++c) ref += q[r * kD + c] * k[j * kD + c];
      e_qk = std::fmax(e_qk, std::fabs(ref - qk[r * kKeys + j]));
    }
  std::printf("q.k, K-major, 128-byte swizzle, SBO 1024: max |error| %g -> %s\n", e_qk, e_qk == 0 ? "PASS" : "FAIL");
  const uint32_t lbo[kCand] = {16, 1024, 1024, 8192, 2048}, sbo[kCand] = {1024, 16, 1024, 1024, 1024};
  bool any = false;
  for (int cand = 0; cand < kCand; ++cand) {
    double e = 0;
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kD; ++c) {
        double ref = 0;
        for (int j = 0; j < kKeys; ++j) ref += p[r * kKeys + j] * v[j * kD + c];
        e = std::fmax(e, std::fabs(ref - pv[cand * kRows * kD + r * kD + c]));
      }
    any |= e == 0;
    std::printf("p.v, MN-major, 128-byte swizzle, LBO %u SBO %u: max |error| %g -> %s\n", lbo[cand], sbo[cand], e,
                e == 0 ? "PASS" : "fail");
  }
  return e_qk == 0 && any ? 0 : 1;
}
