// cpu_backend.cpp — CpuBackend memory, registration, and the op entry points.
#include "cpu_backend.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "common/error.h"
#include "cpu_features.h"
#include "dequantize.h"
#include "matvec.h"

namespace gaacrt::cpu {

CpuBackend::CpuBackend(int n_threads) : pool_(n_threads) {
  info_.backend = "cpu";
  info_.index = 0;
#if defined(__aarch64__)
  const char* arch = "aarch64";
#elif defined(__x86_64__) || defined(_M_X64)
  const char* arch = "x86_64";
#else
  const char* arch = "cpu";
#endif
  info_.name = strfmt("%s (%s), %d threads", arch, isa_name(best_isa()), pool_.size());
}

void* CpuBackend::alloc(size_t bytes) {
  const size_t rounded = (bytes + 255) / 256 * 256;
  void* p = std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
  if (!p) throw Error("backend", "out_of_memory", strfmt("cpu: cannot allocate %zu bytes", bytes));
  return p;
}
void CpuBackend::free(void* p) { std::free(p); }
void CpuBackend::upload(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::download(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void CpuBackend::dequantize(const WeightView& w, float* dst) {
  pool_.parallel_for(w.n_rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + r * w.row_stride, dst + r * w.n_cols, w.n_cols);
  });
}

void CpuBackend::matmul(const WeightView& w, const float* x, int64_t n_tok, float* y) {
  cpu::matmul(w, x, n_tok, y, pool_, best_isa());
}

namespace {

std::vector<DeviceInfo> list_cpu() {
  DeviceInfo d;
  d.backend = "cpu";
  d.name = "host CPU";
  return {d};
}
std::string cpu_reason() { return ""; }
std::unique_ptr<Backend> create_cpu(int, int n_threads) { return std::make_unique<CpuBackend>(n_threads); }

const BackendRegistrar kRegisterCpu{{"cpu", &list_cpu, &cpu_reason, &create_cpu}};

}  // namespace
}  // namespace gaacrt::cpu
