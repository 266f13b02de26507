// wgmma_layout_probe.cu — checks, on an sm_90 GPU, the wgmma step tiles the prefill attention reads
// (backends/cuda/kernels/wgmma.cuh, attention_tiles.cuh issue_bf16_step_tile): a step of kN blocks
// (16 kN keys) of K and V laid out at byte wg_col_bytes(kN) c + 16 r (key r, channels 8c .. 8c+7),
// then q·k K-major (LBO wg_col_bytes, SBO 128: wgmma_n32 and wgmma_n16 for two blocks, wgmma_n64
// for four) and p·v through wgmma_n64<true> (MN-major, LBO 128, SBO wg_col_bytes), each against
// the same products on the host. Small integers, so every sum is exact.
//
//   nvcc -std=c++17 -arch=sm_90a -I backends/cuda -o /tmp/wgmma_probe bench/wgmma_layout_probe.cu && /tmp/wgmma_probe
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/wgmma.cuh"

using namespace gaacrt::cuda::attn;

constexpr int kD = 128, kRows = 64;
__host__ __device__ constexpr uint32_t col_bytes(int keys) { return 16u * keys; }  // attention_tiles.cuh wg_col_bytes

__device__ uint32_t pack2(const __nv_bfloat16* p) {
  return (uint32_t)__bfloat16_as_ushort(p[0]) | ((uint32_t)__bfloat16_as_ushort(p[1]) << 16);
}

// q: [64][128], p: [64][kKeys], k and v: [kKeys][128] (bf16). qk: [64][kKeys]; qk16: [64][16]
// (n16, two-block steps only); pv: [64][128].
template <int kKeys>
__global__ void probe(const __nv_bfloat16* q, const __nv_bfloat16* p, const __nv_bfloat16* k, const __nv_bfloat16* v,
                      float* qk, float* qk16, float* pv) {
  constexpr uint32_t kCol = col_bytes(kKeys), kTile = 16 * kCol;
  __shared__ __align__(128) uint8_t tile[2 * kTile];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  for (int c = tid; c < kKeys * kD / 8; c += 128) {  // chunk c: key c / 16, channels 8 (c % 16) ..
    const int r = c / 16, col = c % 16;
    *reinterpret_cast<uint4*>(tile + kCol * col + 16 * r) = *reinterpret_cast<const uint4*>(k + r * kD + 8 * col);
    *reinterpret_cast<uint4*>(tile + kTile + kCol * col + 16 * r) =
        *reinterpret_cast<const uint4*>(v + r * kD + 8 * col);
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  // A fragments (mma.m16n8k16 layout) of this warp's rows 16 warp + g, + 8.
  auto afrag = [&](const __nv_bfloat16* m, int ld, int kk, uint32_t (&a)[4]) {
    const int r0 = 16 * warp + g, c0 = 16 * kk + 2 * t;
    a[0] = pack2(m + r0 * ld + c0);
    a[1] = pack2(m + (r0 + 8) * ld + c0);
    a[2] = pack2(m + r0 * ld + c0 + 8);
    a[3] = pack2(m + (r0 + 8) * ld + c0 + 8);
  };
  float s[kKeys / 8][4], s16[2][4], o[2][8][4];
  wgmma_fence();
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t a[4];
    afrag(q, kD, kk, a);
    const uint64_t desc = wg_desc(tile + 2 * kCol * kk, kCol, 128);
    if constexpr (kKeys == 32) {
      wgmma_n32(s[0], s[1], s[2], s[3], a, desc, kk > 0);
      wgmma_n16(s16[0], s16[1], a, desc, kk > 0);
    } else {
      wgmma_n64<false>(s, a, desc, kk > 0);
    }
  }
  wgmma_commit();
  wgmma_wait<0>();
  for (int half = 0; half < 2; ++half) {
    wgmma_fence();
    for (int i = 0; i < kKeys / 16; ++i) {
      uint32_t a[4];
      afrag(p, kKeys, i, a);
      wgmma_n64<true>(o[half], a, wg_desc(tile + kTile + 256 * i + 8 * kCol * half, 128, kCol), i > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
  }
  // Accumulator fragment x of 8-column group j: row g + 8 (x / 2), column 8 j + 2 t + x % 2.
  auto put = [&](float* out, int ld, int j, const float (&d)[4]) {
    for (int x = 0; x < 4; ++x) out[(16 * warp + g + 8 * (x / 2)) * ld + 8 * j + 2 * t + x % 2] = d[x];
  };
  for (int j = 0; j < kKeys / 8; ++j) put(qk, kKeys, j, s[j]);
  if constexpr (kKeys == 32)
    for (int j = 0; j < 2; ++j) put(qk16, 16, j, s16[j]);
  for (int half = 0; half < 2; ++half)
    for (int j = 0; j < 8; ++j) put(pv, kD, 8 * half + j, o[half][j]);
}

template <int kKeys>
bool run_probe() {
  std::vector<float> q(kRows * kD), p(kRows * kKeys), k(kKeys * kD), v(kKeys * kD);
  unsigned x = 12345 + kKeys;
  auto rnd = [&] { x = x * 1103515245u + 12345u; return (float)((int)((x >> 16) % 7) - 3); };
  for (auto* vec : {&q, &p, &k, &v})
    for (float& f : *vec) f = rnd();
  auto to_bf = [](const std::vector<float>& f) {
    std::vector<__nv_bfloat16> b(f.size());
    for (size_t i = 0; i < f.size(); ++i) b[i] = __float2bfloat16(f[i]);
    return b;
  };
  const auto qb = to_bf(q), pb = to_bf(p), kb = to_bf(k), vb = to_bf(v);
  __nv_bfloat16 *dq, *dp, *dk, *dv;
  float *dqk, *dqk16, *dpv;
  cudaMalloc(&dq, qb.size() * 2);
  cudaMalloc(&dp, pb.size() * 2);
  cudaMalloc(&dk, kb.size() * 2);
  cudaMalloc(&dv, vb.size() * 2);
  cudaMalloc(&dqk, kRows * kKeys * 4);
  cudaMalloc(&dqk16, kRows * 16 * 4);
  cudaMalloc(&dpv, kRows * kD * 4);
  cudaMemcpy(dq, qb.data(), qb.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dp, pb.data(), pb.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dk, kb.data(), kb.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dv, vb.data(), vb.size() * 2, cudaMemcpyHostToDevice);
  probe<kKeys><<<1, 128>>>(dq, dp, dk, dv, dqk, dqk16, dpv);
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::printf("wgmma probe (%d keys): %s\n", kKeys, cudaGetErrorString(err));
    return false;
  }
  std::vector<float> qk(kRows * kKeys), qk16(kRows * 16), pv(kRows * kD);
  cudaMemcpy(qk.data(), dqk, qk.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(qk16.data(), dqk16, qk16.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(pv.data(), dpv, pv.size() * 4, cudaMemcpyDeviceToHost);
  double e_qk = 0, e_qk16 = 0, e_pv = 0;
  for (int r = 0; r < kRows; ++r) {
    for (int j = 0; j < kKeys; ++j) {
      double ref = 0;
      for (int c = 0; c < kD; ++c) ref += q[r * kD + c] * k[j * kD + c];
      e_qk = std::fmax(e_qk, std::fabs(ref - qk[r * kKeys + j]));
      if (kKeys == 32 && j < 16) e_qk16 = std::fmax(e_qk16, std::fabs(ref - qk16[r * 16 + j]));
    }
    for (int c = 0; c < kD; ++c) {
      double ref = 0;
      for (int j = 0; j < kKeys; ++j) ref += p[r * kKeys + j] * v[j * kD + c];
      e_pv = std::fmax(e_pv, std::fabs(ref - pv[r * kD + c]));
    }
  }
  const bool ok = e_qk == 0 && e_qk16 == 0 && e_pv == 0;
  std::printf("wgmma probe, %d keys: max |error| q.k n%d %g, q.k n16 %g, p.v n64 (transposed B) %g -> %s\n", kKeys,
              kKeys, e_qk, e_qk16, e_pv, ok ? "PASS" : "FAIL");
  return ok;
}

int main() {
  const bool two = run_probe<32>(), four = run_probe<64>();
  return two && four ? 0 : 1;
}
