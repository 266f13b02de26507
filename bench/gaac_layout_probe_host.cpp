// gaac_layout_probe_host.cpp — runs the CUDA probe's kernels (bench/gaac_layout_probe.cu) on the
// CPU, so that their logic is checked before a GPU visit: each warp is 32 std::threads in lockstep
// at every warp intrinsic (shuffles and votes meet at a barrier), the rest of CUDA is a thin shim.
//
//   g++ -std=c++20 -O1 -pthread bench/gaac_layout_probe_host.cpp -o /tmp/probe_host && /tmp/probe_host
//
// Checks, on mixed-mode tiles (3-bit, 4-bit, raw groups, and tiles without escapes): every value
// both loaders produce (k_dump) equals the source BF16, the integer sums agree, and the q·k scores
// of the GAAC loader equal the BF16 loader's bit for bit and a double-precision reference within
// FP32 rounding. Prints "probe host emulation: N passed, 0 failed" and exits 0 on success.
// (Timing is meaningless here; only the GPU run measures.)
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

// ---- the CUDA shim --------------------------------------------------------------------------------
#define GAAC_PROBE_HOST_EMULATION 1
#define __device__
#define __global__
#define __forceinline__ inline

struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
struct Dim3 { unsigned x = 1, y = 1, z = 1; };
thread_local Dim3 threadIdx, blockIdx;
Dim3 blockDim, gridDim;

template <class T>
inline T __ldg(const T* p) { return *p; }
inline unsigned __popc(unsigned x) { return static_cast<unsigned>(__builtin_popcount(x)); }
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned sh) {
  return static_cast<unsigned>(((static_cast<uint64_t>(hi) << 32) | lo) >> (sh & 31));
}
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }

struct WarpEmu {
  std::barrier<> bar{32};
  uint64_t slot[32];
};
thread_local WarpEmu* tl_warp = nullptr;
thread_local int tl_lane = 0;

template <class T>
T warp_exchange(T v, int src) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  tl_warp->slot[tl_lane] = bits;
  tl_warp->bar.arrive_and_wait();
  const uint64_t got = tl_warp->slot[src];
  tl_warp->bar.arrive_and_wait();
  T r;
  std::memcpy(&r, &got, sizeof(T));
  return r;
}
template <class T>
T __shfl_up_sync(unsigned, T v, int d) { return warp_exchange(v, tl_lane >= d ? tl_lane - d : tl_lane); }
template <class T>
T __shfl_sync(unsigned, T v, int src) { return warp_exchange(v, src & 31); }
template <class T>
T __shfl_xor_sync(unsigned, T v, int o) { return warp_exchange(v, tl_lane ^ o); }
inline bool __any_sync(unsigned, bool p) {
  tl_warp->slot[tl_lane] = p;
  tl_warp->bar.arrive_and_wait();
  bool any = false;
  for (int l = 0; l < 32; ++l) any = any || tl_warp->slot[l];
  tl_warp->bar.arrive_and_wait();
  return any;
}
std::mutex g_atomic;
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  std::lock_guard<std::mutex> lock(g_atomic);
  const unsigned long long old = *p;
  *p += v;
  return old;
}

#include "gaac_layout_probe.cu"

// ---- the emulated launch: gridDim.x blocks of blockDim.x threads, one warp (32 threads) at a time
template <class F>
void launch(unsigned blocks, unsigned threads, F kernel) {
  blockDim.x = threads;
  gridDim.x = blocks;
  for (unsigned b = 0; b < blocks; ++b)
    for (unsigned w = 0; w < threads / 32; ++w) {
      WarpEmu warp;
      std::vector<std::thread> lanes;
      for (int l = 0; l < 32; ++l)
        lanes.emplace_back([&, l] {
          tl_warp = &warp;
          tl_lane = l;
          threadIdx.x = w * 32 + l;
          blockIdx.x = b;
          kernel();
        });
      for (auto& t : lanes) t.join();
    }
}

int main() {
  int passed = 0, failed = 0;
  auto check = [&](bool ok, const char* what) {
    std::printf("[%s] %s\n", ok ? " ok " : "FAIL", what);
    (ok ? passed : failed)++;
  };
  // 48 tiles, 8 heads: heads 0-5 mixed (4-bit and raw groups, some raw-heavy), heads 6-7 pure 3-bit.
  const size_t n_tiles = 48;
  std::mt19937 rng(7);
  std::vector<uint8_t> b3(N_HEADS * D), b4(N_HEADS * D);
  for (int i = 0; i < N_HEADS * D; ++i) { b3[i] = static_cast<uint8_t>(110 + rng() % 15); b4[i] = static_cast<uint8_t>(b3[i] - 4); }
  std::vector<uint16_t> raw(n_tiles * 16 * D);
  for (size_t t = 0; t < n_tiles; ++t) {
    const int head = static_cast<int>(t % N_HEADS);
    const double p4 = head < 6 ? 0.15 : 0.0, praw = head < 6 ? (head == 5 ? 0.2 : 0.02) : 0.0;
    for (int tok = 0; tok < 16; ++tok)
      for (int g = 0; g < D / 8; ++g) {
        const double r = (rng() % 100000) / 100000.0;
        const int odd = static_cast<int>(rng() % 8);
        for (int m = 0; m < 8; ++m) {
          const int c = 8 * g + m;
          uint32_t e = b3[head * D + c] + rng() % 8;
          if (m == odd && r < praw) e = rng() % 256;
          else if (m == odd && r < praw + p4) e = b3[head * D + c] + 8 + rng() % 4;
          raw[(t * 16 + tok) * D + c] = static_cast<uint16_t>((rng() & 0x807Fu) | (e << 7));
        }
      }
  }
  const uint32_t cap = gaac_max_escape_bytes(D), sb = gaac_slot_bytes(D, cap);
  std::vector<uint8_t> slots(n_tiles * sb + 16, 0);
  uint64_t n4 = 0, nraw = 0;
  for (size_t t = 0; t < n_tiles; ++t) {
    gaac_encode_tile(&raw[t * 16 * D], D, D, &b3[(t % N_HEADS) * D], &b4[(t % N_HEADS) * D], cap, &slots[t * sb]);
    const GaacModeCounts mc = gaac_tile_modes(&slots[t * sb], D);
    n4 += mc.n4;
    nraw += mc.nraw;
  }
  check(n4 > 0 && nraw > 0, "the tiles mix 3-bit, 4-bit and raw groups");
  std::vector<uint4> packed(N_HEADS * 16);
  for (int hd = 0; hd < N_HEADS; ++hd)
    for (int g = 0; g < 16; ++g) {
      uint32_t w[4];
      std::memcpy(&w[0], &b3[hd * D + 8 * g], 8);
      std::memcpy(&w[2], &b4[hd * D + 8 * g], 8);
      packed[hd * 16 + g] = {w[0], w[1], w[2], w[3]};
    }
  std::vector<float> q(N_HEADS * N_Q * D);
  for (auto& x : q) x = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 1000.f;

  const Bf16Loader lb{reinterpret_cast<const uint8_t*>(raw.data())};
  const GaacLoader<true> lg{slots.data(), sb};
  const unsigned blocks = 1, threads = 256;  // 8 warps: one per kv-head, each walks its 6 tiles

  std::vector<uint16_t> dump_b(raw.size(), 0xFFFF), dump_g(raw.size(), 0xFFFF);
  launch(blocks, threads, [&] { k_dump(lb, packed.data(), n_tiles, dump_b.data()); });
  launch(blocks, threads, [&] { k_dump(lg, packed.data(), n_tiles, dump_g.data()); });
  check(dump_b == raw, "k_dump<Bf16Loader> reproduces every BF16 value");
  size_t first = 0;
  while (first < raw.size() && dump_g[first] == raw[first]) ++first;
  if (first < raw.size())
    std::printf("       first wrong GAAC value: tile %zu token %zu channel %zu: %04x, expected %04x\n",
                first / (16 * D), (first / D) % 16, first % D, dump_g[first], raw[first]);
  check(dump_g == raw, "k_dump<GaacLoader> reproduces every BF16 value");

  unsigned long long s_b = 0, s_g = 0, s_ref = 0;
  launch(blocks, threads, [&] { k_sum(lb, packed.data(), n_tiles, &s_b); });
  launch(blocks, threads, [&] { k_sum(lg, packed.data(), n_tiles, &s_g); });
  for (size_t i = 0; i < raw.size(); i += 2) s_ref += raw[i] | (static_cast<uint32_t>(raw[i + 1]) << 16);
  // Per-warp 32-bit wrapping sums added as 64-bit: compare modulo 2^32 per warp -> compare totals
  // of the two loaders exactly, and the reference modulo 2^32.
  check(s_b == s_g && (s_b & 0xFFFFFFFFull) == (s_ref & 0xFFFFFFFFull), "k_sum: the loaders' sums agree");

  std::vector<float> sc_b(n_tiles * 16 * N_Q, NAN), sc_g(n_tiles * 16 * N_Q, NAN);
  launch(blocks, threads, [&] { k_qk(lb, packed.data(), q.data(), n_tiles, sc_b.data()); });
  launch(blocks, threads, [&] { k_qk(lg, packed.data(), q.data(), n_tiles, sc_g.data()); });
  check(std::memcmp(sc_b.data(), sc_g.data(), sc_b.size() * 4) == 0, "k_qk: GAAC scores equal BF16 scores bit for bit");
  double worst = 0;
  for (size_t t = 0; t < n_tiles; ++t)
    for (int tok = 0; tok < 16; ++tok)
      for (int a = 0; a < N_Q; ++a) {
        double ref = 0, mag = 0;
        for (int c = 0; c < D; ++c) {
          const double x = __uint_as_float(static_cast<unsigned>(raw[(t * 16 + tok) * D + c]) << 16);
          const double w = q[((t % N_HEADS) * N_Q + a) * D + c];
          ref += x * w;
          mag += std::fabs(x * w);
        }
        const double got = sc_g[(t * 16 + tok) * N_Q + a];
        worst = std::fmax(worst, std::fabs(got - ref) / (mag + 1e-30));
      }
  std::printf("       worst |score - float64 reference| / sum|terms| = %.2e\n", worst);
  check(worst < 1e-5, "k_qk: scores match a float64 q·k (every token, every head, every tile)");
  std::printf("probe host emulation: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
