// emulation_probe.cpp — runs probe_kernels.metal under the MSL emulation and checks each property,
// printing one line per check and "N passed, M failed" (tests/test_metal_emulation.py builds and
// runs it). Links only the emulation runtime: no gaacrt library.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "emulation/fiber.h"
#include "metal/emulation/runtime.h"

namespace {

int passed = 0, failed = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  (ok ? passed : failed)++;
}

struct Args { uint32_t n; };

std::vector<float> run(const char* name, uint32_t threads, uint32_t n, std::vector<size_t> tg = {}, std::string* err = nullptr) {
  std::vector<float> out(threads * 8, -1.f);
  Args a{n};
  msl_emu::Launch l;
  l.threads = threads;
  l.buffers = {&a, out.data()};
  l.tg_bytes = tg;
  const msl_emu::KernelInfo* k = msl_emu::find_kernel(name);
  if (!k) {
    check(false, std::string("kernel ") + name + " is registered");
    return out;
  }
  try {
    msl_emu::run_kernel(*k, l);
    if (err) *err = "";
  } catch (const msl_emu::Error& e) {
    if (err) *err = e.what();
    else check(false, std::string(name) + " ran: " + e.what());
  }
  return out;
}

}  // namespace

int main() {
  std::printf("fiber switch: %s\n", gaacrt_emu::fiber_switch_kind());
  {
    const auto o = run("simd_ops", 64, 0);
    bool sum = true, mx = true, mn = true, xr = true, down = true, pre = true, bc = true, rev = true;
    for (uint32_t t = 0; t < 64; ++t) {
      const uint32_t lane = t % 32, sg = t / 32;
      const float base = 0.5f * sg, v = lane + base;
      const float* r = &o[t * 8];
      sum &= r[0] == 496.f + 32 * base;
      mx &= r[1] == 31.f + base;
      mn &= r[2] == base;
      xr &= r[3] == (float)(lane ^ 5) + base;
      down &= r[4] == (lane + 3 < 32 ? (float)(lane + 3) + base : v);
      pre &= r[5] == (float)lane;
      bc &= r[6] == 7.f + base;
      rev &= r[7] == (float)(31 - lane) + base;
    }
    check(sum, "simd_sum adds the 32 lanes of each SIMD group");
    check(mx && mn, "simd_max / simd_min");
    check(xr, "simd_shuffle_xor");
    check(down, "simd_shuffle_down keeps a lane's own value past the group's end");
    check(pre, "simd_prefix_exclusive_sum");
    check(bc && rev, "simd_broadcast / simd_shuffle");
  }
  {
    const auto o = run("sum_after_exit", 32, 20);
    bool ok = true;
    for (uint32_t t = 0; t < 20; ++t) ok &= o[t] == 20.f;
    for (uint32_t t = 20; t < 32; ++t) ok &= o[t] == -1.f;
    check(ok, "lanes that returned take no part in a SIMD reduction");
  }
  {
    const auto good = run("neighbour", 64, 1, {64 * 4});
    bool ok = true;
    for (uint32_t t = 0; t < 64; ++t) ok &= good[t] == (float)((t + 1) % 64);
    check(ok, "with the barrier every thread reads its neighbour's write");
    const auto racy = run("neighbour", 64, 0, {64 * 4});
    int wrong = 0;
    for (uint32_t t = 0; t < 64; ++t) wrong += racy[t] != (float)((t + 1) % 64);
    check(wrong > 0, "without the barrier some thread reads a slot not yet written (" + std::to_string(wrong) + " of 64)");
  }
  {
    const auto o = run("uninit", 32, 0, {32 * 4});
    bool nan = true;
    for (uint32_t t = 0; t < 32; ++t) nan &= std::isnan(o[t]);
    check(nan, "unwritten threadgroup memory reads as NaN, not zero");
  }
  {
    std::string err;
    run("divergent_barrier", 64, 0, {}, &err);
    check(err.find("threadgroup_barrier") != std::string::npos, "a barrier only some threads reach is an error: " + err);
    const auto h = run("half_simd", 32, 0, {}, &err);
    bool half = err.empty();
    for (uint32_t t = 0; t < 32; ++t) half &= h[t] == (t < 16 ? 16.f : 0.f);
    check(half, "a SIMD call in a branch reduces over the lanes that take it");
    run("two_sites", 32, 0, {}, &err);
    check(err.find("lane-divergent") != std::string::npos, "lanes at two SIMD call sites is an error: " + err);
  }
  {
    Args a{0};
    std::vector<float> out(32);
    msl_emu::Launch l;
    l.threads = 48;
    l.buffers = {&a, out.data()};
    std::string err;
    try {
      msl_emu::run_kernel(*msl_emu::find_kernel("sum_after_exit"), l);
    } catch (const msl_emu::Error& e) {
      err = e.what();
    }
    check(err.find("multiple of 32") != std::string::npos, "a threadgroup that is not whole SIMD groups is refused");
    l.threads = 32;
    l.buffers = {&a};
    try {
      msl_emu::run_kernel(*msl_emu::find_kernel("sum_after_exit"), l);
      err = "";
    } catch (const msl_emu::Error& e) {
      err = e.what();
    }
    check(err.find("binds 1 buffers") != std::string::npos, "a launch binding the wrong number of arguments is refused");
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
