// gaac_layout_probe.cu — does the GAAC tile layout (src/codec/gaac/gaac_format.h) read fast on a
// GPU? A standalone program (no gaacrt build):
//
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/gaac_layout_probe.cu -o /tmp/probe
//   /tmp/probe [n_tiles=32768] [p_4bit_groups=0.10] [p_raw_groups=0.003] [capacity=auto]
//
// Fills a buffer of synthetic D = 128 tiles (8 kv-heads, per-head bases; by default 32768 tiles =
// a 64K context of one layer's K, 134 MB as BF16) with the requested mode mix, encodes them on the
// host with the header's reference encoder, and times warp-per-tile readers with CUDA events:
//   bf16      plain BF16 tiles [16][128], 16-byte loads, the same lane ownership
//   gaac      the GAAC slots, every BF16 value rebuilt with the header's word functions
//   gaac-load the same GAAC bytes loaded (escapes included) but not decoded: the memory floor
// each with two consumers: `sum` (a wrapping integer sum of the bf16x2 words: decode cost alone)
// and `qk` (q·k for the 4 query heads of a GQA group in FP32 FMA, scores written out: the math an
// attention kernel on CUDA cores does). The gaac sums must equal the bf16 sums and the gaac
// scores must equal the bf16 scores bit for bit (same arithmetic in the same order), or the
// program exits 1. See bench/gaac_layout_notes.md for what to read in the output.
//
// Lane map (the header's): lane l owns group column g = l & 15 (bases in registers) and the 8
// groups j at tokens 4*(j/2) + 2*(l/16) + j%2. One warp per tile, warps stay on one kv-head.
#ifndef GAAC_PROBE_HOST_EMULATION  // bench/gaac_layout_probe_host.cpp runs the kernels on the CPU
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "../src/codec/gaac/gaac_format.h"

using namespace gaacrt;

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                    \
    }                                                                                  \
  } while (0)

constexpr int D = 128, N_HEADS = 8, N_Q = 4;  // tile dim, kv-heads, query heads per kv-head
constexpr uint32_t FULL = 0xFFFFFFFFu;
constexpr size_t RAW_TILE = 2 * 16 * D;

struct Group8 { uint32_t w[4]; };  // channels 8g..8g+7 of one token as 4 bf16x2 words

// ---- loaders: fill the lane's 8 groups and say which token each is -------------------------------
struct Bf16Loader {
  const uint8_t* tiles;
  __device__ static int token(int j, int h) { return 2 * j + h; }  // rows h, h+2, ..: 512 B per warp load
  __device__ void load(size_t tile, int lane, uint4, Group8 (&out)[8]) const {
    const uint8_t* base = tiles + tile * RAW_TILE + 16 * (lane & 15);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(base + (2 * j + (lane >> 4)) * 2 * D));
      out[j] = {{v.x, v.y, v.z, v.w}};
    }
  }
};

__device__ __forceinline__ uint32_t ld_u32_unaligned(const uint8_t* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint32_t* w = reinterpret_cast<const uint32_t*>(a & ~uintptr_t(3));
  return __funnelshift_r(__ldg(w), __ldg(w + 1), 8 * (uint32_t)(a & 3));
}

template <bool Decode>
struct GaacLoader {
  const uint8_t* slots;
  uint32_t slot_bytes;
  __device__ static int token(int j, int h) { return 4 * (j >> 1) + 2 * h + (j & 1); }
  // bases: the lane's b3 (x, y) and b4 (z, w) words, loaded once per warp.
  __device__ void load(size_t tile, int lane, uint4 bases, Group8 (&out)[8]) const {
    const uint8_t* s = slots + tile * slot_bytes;
    uint4 sm[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) sm[i] = __ldg(reinterpret_cast<const uint4*>(s + 16 * (i * 32 + lane)));
    const uint4 wa = __ldg(reinterpret_cast<const uint4*>(s + 16 * D + 16 * lane));
    const uint2 wb = __ldg(reinterpret_cast<const uint2*>(s + 20 * D + 8 * lane));
    const uint32_t tags = __ldg(reinterpret_cast<const unsigned short*>(s + 22 * D) + lane);
    const uint32_t w[6] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y};
    const uint8_t* esc = s + GAAC_FIXED_BYTES_128;
    // Escape offsets: one warp scan of (X bytes | raw records << 16), skipped by warps without any.
    const GaacTagMasks m = gaac_tag_masks(tags);
    uint32_t xo = 0, ro = 0;
    if (__any_sync(FULL, tags != 0)) {
      const uint32_t cnt = __popc(m.x) | (__popc(m.raw) << 16);
      uint32_t incl = cnt;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const uint32_t v = __shfl_up_sync(FULL, incl, o);
        if (lane >= o) incl += v;
      }
      const uint32_t total = __shfl_sync(FULL, incl, 31), excl = incl - cnt;
      xo = excl & 0xFFFFu;
      ro = (total & 0xFFFFu) + 4 * (excl >> 16);
    }
    const GaacU32x2 b3 = {bases.x, bases.y}, b4 = {bases.z, bases.w};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t tag = (tags >> (2 * j)) & 3u, below = (1u << (2 * j)) - 1u;
      uint32_t x = 0, r = 0;
      if (tag != 0) x = __ldg(esc + xo + __popc(m.x & below));
      if (tag == 2) r = ld_u32_unaligned(esc + ro + 4 * __popc(m.raw & below));
      const uint4 c = sm[j >> 1];
      const uint32_t s0 = (j & 1) ? c.z : c.x, s1 = (j & 1) ? c.w : c.y;
      if (Decode) {
        const GaacU32x2 low3 = gaac_group_codes(w[3 * (j >> 2)], w[3 * (j >> 2) + 1], w[3 * (j >> 2) + 2], j & 3);
        const GaacU32x2 e = gaac_group_exponents(tag, b3, b4, low3, x, r);
        const GaacU32x2 p = gaac_bf16x4(s0, e.lo), q = gaac_bf16x4(s1, e.hi);
        out[j] = {{p.lo, p.hi, q.lo, q.hi}};
      } else {  // touch every loaded byte once, rebuild nothing
        out[j] = {{s0 ^ w[j % 6], s1 ^ x, tag ^ r, 0u}};
      }
    }
  }
};

// ---- consumers -------------------------------------------------------------------------------
__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

// Wrapping sum of the words, reduced per warp into one 64-bit atomic: decode cost, no FP math.
template <class Loader>
__global__ void k_sum(Loader ld, const uint4* bases, size_t n_tiles, unsigned long long* sum) {
  const int lane = threadIdx.x & 31;
  const size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
  const size_t n_warps = (gridDim.x * (size_t)blockDim.x) >> 5;
  const int head = (int)(warp % N_HEADS);
  const uint4 b = bases[head * 16 + (lane & 15)];
  uint32_t acc = 0;
  for (size_t k = warp / N_HEADS; k * N_HEADS + head < n_tiles; k += n_warps / N_HEADS) {
    Group8 g[8];
    ld.load(k * N_HEADS + head, lane, b, g);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc += g[j].w[0] + g[j].w[1] + g[j].w[2] + g[j].w[3];
  }
#pragma unroll
  for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(FULL, acc, o);
  if (lane == 0) atomicAdd(sum, (unsigned long long)acc);
}

// q·k of 4 query heads against every token, FP32 FMA in a fixed order; the 16 lanes holding one
// token's 16 group columns reduce their 32 partials (8 tokens x 4 heads) with a halving butterfly,
// leaving 2 scores per lane. scores: [tile][16 tokens][4 heads].
template <class Loader>
__global__ void k_qk(Loader ld, const uint4* bases, const float* q, size_t n_tiles, float* scores) {
  const int lane = threadIdx.x & 31, g = lane & 15, h = lane >> 4;
  const size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
  const size_t n_warps = (gridDim.x * (size_t)blockDim.x) >> 5;
  const int head = (int)(warp % N_HEADS);
  const uint4 b = bases[head * 16 + g];
  float qr[N_Q][8];
#pragma unroll
  for (int a = 0; a < N_Q; ++a)
#pragma unroll
    for (int m = 0; m < 8; ++m) qr[a][m] = q[(head * N_Q + a) * D + 8 * g + m];
  for (size_t k = warp / N_HEADS; k * N_HEADS + head < n_tiles; k += n_warps / N_HEADS) {
    const size_t tile = k * N_HEADS + head;
    Group8 grp[8];
    ld.load(tile, lane, b, grp);
    float v[32];
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int a = 0; a < N_Q; ++a) {
        float s = 0.f;
#pragma unroll
        for (int k2 = 0; k2 < 4; ++k2) {
          s = fmaf(qr[a][2 * k2], bf_lo(grp[j].w[k2]), s);
          s = fmaf(qr[a][2 * k2 + 1], bf_hi(grp[j].w[k2]), s);
        }
        v[4 * j + a] = s;
      }
    int n = 32;
#pragma unroll
    for (int o = 8; o >= 1; o >>= 1) {
      const bool upper = (lane & o) != 0;
      n >>= 1;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        if (i < n) {
          const float send = upper ? v[i] : v[i + n], keep = upper ? v[i + n] : v[i];
          v[i] = keep + __shfl_xor_sync(FULL, send, o);
        }
      }
    }
    // Lane bits (8, 4, 2, 1) chose the upper halves: it holds entries 2*idx and 2*idx + 1.
    const int idx = ((g >> 3) & 1) * 8 + ((g >> 2) & 1) * 4 + ((g >> 1) & 1) * 2 + (g & 1);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int e = 2 * idx + r, j = e >> 2, a = e & 3;
      scores[(tile * 16 + Loader::token(j, h)) * N_Q + a] = v[r];
    }
  }
}

// Every value a loader produces, written to out[tile][token][channel] (the diagnostic behind the
// checks: on a mismatch the host prints the first wrong value).
template <class Loader>
__global__ void k_dump(Loader ld, const uint4* bases, size_t n_tiles, uint16_t* out) {
  const int lane = threadIdx.x & 31, g = lane & 15, h = lane >> 4;
  const size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
  const size_t n_warps = (gridDim.x * (size_t)blockDim.x) >> 5;
  const int head = (int)(warp % N_HEADS);
  const uint4 b = bases[head * 16 + g];
  for (size_t k = warp / N_HEADS; k * N_HEADS + head < n_tiles; k += n_warps / N_HEADS) {
    const size_t tile = k * N_HEADS + head;
    Group8 grp[8];
    ld.load(tile, lane, b, grp);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint4* o = reinterpret_cast<uint4*>(out + (tile * 16 + Loader::token(j, h)) * D + 8 * g);
      *o = make_uint4(grp[j].w[0], grp[j].w[1], grp[j].w[2], grp[j].w[3]);
    }
  }
}

// ---- host ---------------------------------------------------------------------------------------
#ifndef GAAC_PROBE_HOST_EMULATION

template <class F>
float time_us(F launch, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  launch();  // warm-up
  CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(1000.f * ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  const size_t n_tiles = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 32768;
  const double p4 = argc > 2 ? std::atof(argv[2]) : 0.10, praw = argc > 3 ? std::atof(argv[3]) : 0.003;
  int cap_arg = argc > 4 ? std::atoi(argv[4]) : -1;
  if (n_tiles % N_HEADS) { std::fprintf(stderr, "n_tiles must be a multiple of %d\n", N_HEADS); return 2; }

  // Synthetic KV: per-head bases near 118; per group: 4-bit with p4 (one element 8..11 above b3),
  // raw with praw (one element at exponent 30), else all 8 inside the 3-bit window.
  std::mt19937 rng(1234);
  std::vector<uint8_t> b3(N_HEADS * D), b4(N_HEADS * D);
  for (int i = 0; i < N_HEADS * D; ++i) { b3[i] = (uint8_t)(110 + rng() % 15); b4[i] = (uint8_t)(b3[i] - 4); }
  std::vector<uint16_t> raw(n_tiles * 16 * D);
  std::uniform_real_distribution<double> u(0, 1);
  for (size_t t = 0; t < n_tiles; ++t) {
    const uint8_t* tb3 = &b3[(t % N_HEADS) * D];
    for (int tok = 0; tok < 16; ++tok)
      for (int g = 0; g < D / 8; ++g) {
        const double r = u(rng);
        const int odd = (int)(rng() % 8);
        for (int m = 0; m < 8; ++m) {
          const int c = 8 * g + m;
          uint32_t e = tb3[c] + rng() % 8;
          if (m == odd && r < praw) e = 30;
          else if (m == odd && r < praw + p4) e = tb3[c] + 8 + rng() % 4;
          raw[(t * 16 + tok) * D + c] = (uint16_t)((rng() & 0x807Fu) | (e << 7));
        }
      }
  }
  // Encode; capacity = the largest escape count, rounded up to 16 (every tile fits).
  std::vector<int32_t> esc(n_tiles);
  uint32_t cap = 0;
  {
    std::vector<uint8_t> tmp(gaac_slot_bytes(D, gaac_max_escape_bytes(D)));
    for (size_t t = 0; t < n_tiles; ++t) {
      esc[t] = gaac_encode_tile(&raw[t * 16 * D], D, D, &b3[(t % N_HEADS) * D], &b4[(t % N_HEADS) * D],
                                gaac_max_escape_bytes(D), tmp.data());
      cap = std::max(cap, (uint32_t)esc[t]);
    }
  }
  cap = cap_arg >= 0 ? (uint32_t)cap_arg : (cap + 15) / 16 * 16;
  const uint32_t sb = gaac_slot_bytes(D, cap);
  std::vector<uint8_t> slots(n_tiles * sb + 16, 0);  // +16: the unaligned raw-record read may peek 3 bytes on
  uint64_t n3 = 0, n4 = 0, nr = 0, esc_total = 0;
  for (size_t t = 0; t < n_tiles; ++t) {
    if (gaac_encode_tile(&raw[t * 16 * D], D, D, &b3[(t % N_HEADS) * D], &b4[(t % N_HEADS) * D], cap,
                         &slots[t * sb]) < 0) {
      std::fprintf(stderr, "capacity %u too small for tile %zu (%d escape bytes)\n", cap, t, esc[t]);
      return 2;
    }
    const GaacModeCounts c = gaac_tile_modes(&slots[t * sb], D);
    n3 += c.n3; n4 += c.n4; nr += c.nraw; esc_total += esc[t];
  }
  const double groups = double(n3 + n4 + nr);
  const double gaac_bytes = double(n_tiles) * GAAC_FIXED_BYTES_128 + double(esc_total);
  const double bf16_bytes = double(n_tiles) * RAW_TILE;
  // Packed bases per (head, group column): 8 b3 then 8 b4 (GaacCalibration::packed_bases layout).
  std::vector<uint8_t> packed(N_HEADS * 16 * 16);
  for (int hd = 0; hd < N_HEADS; ++hd)
    for (int g = 0; g < 16; ++g)
      for (int m = 0; m < 8; ++m) {
        packed[(hd * 16 + g) * 16 + m] = b3[hd * D + 8 * g + m];
        packed[(hd * 16 + g) * 16 + 8 + m] = b4[hd * D + 8 * g + m];
      }
  std::vector<float> q(N_HEADS * N_Q * D);
  for (auto& x : q) x = (float)(u(rng) * 2 - 1);

  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  uint8_t *d_raw, *d_slots;
  uint4* d_bases;
  float *d_q, *d_s_bf16, *d_s_gaac;
  unsigned long long* d_sum;
  CK(cudaMalloc(&d_raw, raw.size() * 2));
  CK(cudaMalloc(&d_slots, slots.size()));
  CK(cudaMalloc(&d_bases, packed.size()));
  CK(cudaMalloc(&d_q, q.size() * 4));
  CK(cudaMalloc(&d_s_bf16, n_tiles * 16 * N_Q * 4));
  CK(cudaMalloc(&d_s_gaac, n_tiles * 16 * N_Q * 4));
  CK(cudaMalloc(&d_sum, 8));
  CK(cudaMemcpy(d_raw, raw.data(), raw.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_slots, slots.data(), slots.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_bases, packed.data(), packed.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_q, q.data(), q.size() * 4, cudaMemcpyHostToDevice));

  const Bf16Loader lb{d_raw};
  const GaacLoader<true> lg{d_slots, sb};
  const GaacLoader<false> ll{d_slots, sb};
  const int threads = 256, blocks = prop.multiProcessorCount * 8;
  const int reps = 30;
  auto sum_of = [&](auto loader) {
    CK(cudaMemset(d_sum, 0, 8));
    k_sum<<<blocks, threads>>>(loader, d_bases, n_tiles, d_sum);
    CK(cudaGetLastError());
    unsigned long long s;
    CK(cudaMemcpy(&s, d_sum, 8, cudaMemcpyDeviceToHost));
    return s;
  };
  const unsigned long long s_bf16 = sum_of(lb), s_gaac = sum_of(lg);
  k_qk<<<blocks, threads>>>(lb, d_bases, d_q, n_tiles, d_s_bf16);
  k_qk<<<blocks, threads>>>(lg, d_bases, d_q, n_tiles, d_s_gaac);
  CK(cudaDeviceSynchronize());
  std::vector<float> sc_b(n_tiles * 16 * N_Q), sc_g(n_tiles * 16 * N_Q);
  CK(cudaMemcpy(sc_b.data(), d_s_bf16, sc_b.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(sc_g.data(), d_s_gaac, sc_g.size() * 4, cudaMemcpyDeviceToHost));
  size_t diff = 0;
  for (size_t i = 0; i < sc_b.size(); ++i) diff += std::memcmp(&sc_b[i], &sc_g[i], 4) != 0;
  // Every decoded value against the host's BF16 tiles (both loaders).
  size_t bad_values[2] = {0, 0};
  {
    uint16_t* d_dump;
    CK(cudaMalloc(&d_dump, raw.size() * 2));
    std::vector<uint16_t> dump(raw.size());
    for (int which = 0; which < 2; ++which) {
      CK(cudaMemset(d_dump, 0xFF, raw.size() * 2));
      if (which == 0) k_dump<<<blocks, threads>>>(lb, d_bases, n_tiles, d_dump);
      else k_dump<<<blocks, threads>>>(lg, d_bases, n_tiles, d_dump);
      CK(cudaGetLastError());
      CK(cudaMemcpy(dump.data(), d_dump, raw.size() * 2, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < raw.size(); ++i) {
        if (dump[i] == raw[i]) continue;
        if (bad_values[which]++ == 0) {
          const size_t t = i / (16 * D), tok = (i / D) % 16, c = i % D;
          const GaacModeCounts mc = gaac_tile_modes(&slots[t * sb], D);
          std::printf("%s loader: first wrong value at tile %zu token %zu channel %zu: %04x, expected %04x "
                      "(tile modes %u/%u/%u)\n", which ? "gaac" : "bf16", t, tok, c, dump[i], raw[i], mc.n3, mc.n4, mc.nraw);
        }
      }
    }
    CK(cudaFree(d_dump));
  }

  std::printf("GAAC layout probe on %s (%d SMs), %zu tiles of 16 x %d (%.1f MB BF16)\n", prop.name,
              prop.multiProcessorCount, n_tiles, D, bf16_bytes / 1e6);
  std::printf("groups: 3-bit %.2f%%  4-bit %.2f%%  raw %.3f%%; mean escapes %.1f B/tile; capacity %u; "
              "codec ratio %.4f\n", 100 * n3 / groups, 100 * n4 / groups, 100 * nr / groups,
              double(esc_total) / n_tiles, cap, bf16_bytes / gaac_bytes);
  std::printf("check: sum bf16 %016llx gaac %016llx %s; qk scores differing: %zu of %zu; wrong values: bf16 %zu, "
              "gaac %zu\n", s_bf16, s_gaac, s_bf16 == s_gaac ? "equal" : "DIFFER", diff, sc_b.size(), bad_values[0],
              bad_values[1]);

  struct Row { const char* name; float us; double bytes; };
  std::vector<Row> rows;
  auto add = [&](const char* name, double bytes, auto launch) { rows.push_back({name, time_us(launch, reps), bytes}); };
  add("sum  bf16     ", bf16_bytes, [&] { k_sum<<<blocks, threads>>>(lb, d_bases, n_tiles, d_sum); });
  add("sum  gaac     ", gaac_bytes, [&] { k_sum<<<blocks, threads>>>(lg, d_bases, n_tiles, d_sum); });
  add("sum  gaac-load", gaac_bytes, [&] { k_sum<<<blocks, threads>>>(ll, d_bases, n_tiles, d_sum); });
  add("qk   bf16     ", bf16_bytes, [&] { k_qk<<<blocks, threads>>>(lb, d_bases, d_q, n_tiles, d_s_bf16); });
  add("qk   gaac     ", gaac_bytes, [&] { k_qk<<<blocks, threads>>>(lg, d_bases, d_q, n_tiles, d_s_gaac); });
  add("qk   gaac-load", gaac_bytes, [&] { k_qk<<<blocks, threads>>>(ll, d_bases, d_q, n_tiles, d_s_gaac); });
  CK(cudaGetLastError());
  std::printf("\n%-15s %10s %14s %14s %10s\n", "kernel", "us", "BF16-eq GB/s", "bytes GB/s", "vs bf16");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const float base = rows[i < 3 ? 0 : 3].us;
    std::printf("%-15s %10.1f %14.1f %14.1f %9.3fx\n", r.name, r.us, bf16_bytes / (r.us * 1e3), r.bytes / (r.us * 1e3),
                base / r.us);
  }
  const bool ok = s_bf16 == s_gaac && diff == 0 && bad_values[0] == 0 && bad_values[1] == 0;
  if (!ok) std::printf("\nFAILED: the GAAC reader does not reproduce the BF16 values\n");
  return ok ? 0 : 1;
}
#endif  // GAAC_PROBE_HOST_EMULATION
