// attention_timeline.cu — GAACRT_CUDA_ATTN_TIMELINE (attention_timeline.h says what it records).
#include "attention_timeline.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "cuda_common.h"

namespace gaacrt::cuda {
namespace {

struct Timeline {
  std::mutex mu;
  std::string path;
  uint64_t* host = nullptr;  // host-mapped, `cap` blocks of kStamps
  uint64_t* dev = nullptr;
  int64_t cap = 0, n = 0;
};

Timeline& timeline() {
  static Timeline t;
  static const bool init = [] {
    const char* e = std::getenv("GAACRT_CUDA_ATTN_TIMELINE");
    if (e && *e) t.path = e;
    return true;
  }();
  (void)init;
  return t;
}

}  // namespace

uint64_t* attn_timeline_begin(int64_t n_blocks, bool capturing) {
  Timeline& t = timeline();
  if (t.path.empty() || capturing || n_blocks <= 0) return nullptr;
  std::lock_guard<std::mutex> lock(t.mu);
  if (n_blocks > t.cap) {
    if (t.host) GAACRT_CUDA_CHECK(cudaFreeHost(t.host));
    void* h = nullptr;
    GAACRT_CUDA_CHECK(cudaHostAlloc(&h, (size_t)n_blocks * attn::kStamps * sizeof(uint64_t), cudaHostAllocMapped));
    void* d = nullptr;
    GAACRT_CUDA_CHECK(cudaHostGetDevicePointer(&d, h, 0));
    t.host = static_cast<uint64_t*>(h);
    t.dev = static_cast<uint64_t*>(d);
    t.cap = n_blocks;
  }
  std::memset(t.host, 0, (size_t)n_blocks * attn::kStamps * sizeof(uint64_t));
  t.n = n_blocks;
  return t.dev;
}

void attn_timeline_end(uint64_t* stamps, cudaStream_t stream, const char* format, dim3 grid, int32_t n_split) {
  if (stamps == nullptr) return;
  Timeline& t = timeline();
  GAACRT_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::lock_guard<std::mutex> lock(t.mu);
  FILE* f = std::fopen(t.path.c_str(), "a");
  if (!f) return;  // a diagnostic: an unwritable path loses the line, never the launch
  std::fprintf(f, "%s %u %u %u %d", format, grid.x, grid.y, grid.z, n_split);
  for (int64_t i = 0; i < t.n * attn::kStamps; ++i) std::fprintf(f, " %llu", (unsigned long long)t.host[i]);
  std::fprintf(f, "\n");
  std::fclose(f);
}

}  // namespace gaacrt::cuda
