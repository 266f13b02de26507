// host_hazards.cpp — the Metal backend's host logic (backends/metal/host/metal_backend.cpp) around
// in-flight work, on the emulated backend, whose kernels run only when the host must wait (as a GPU
// finishes only then): a host write to a buffer a queued kernel reads waits for it; a read of a
// buffer a queued kernel writes waits for it; a buffer no queued kernel uses is written at once;
// freeing a buffer in use waits; staged block tables are copied at encode time. Prints
// "N passed, M failed" (tests/test_metal_host.py).
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "metal/host/metal_backend.h"

using namespace gaacrt;

namespace {
int passed = 0, failed = 0;
void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  (ok ? passed : failed)++;
}
}  // namespace

int main() {
  std::unique_ptr<Backend> be = create_backend("metal-emulated", 0, 1);
  auto* mb = dynamic_cast<mtl::MetalBackendBase*>(be.get());
  check(mb != nullptr, "metal-emulated is a MetalBackendBase");
  const int n = 1000;
  std::vector<float> x0(n, 1.f), x1(n, 100.f), y0(n, 2.f), out(n);
  float* x = static_cast<float*>(be->alloc(n * 4));
  float* y = static_cast<float*>(be->alloc(n * 4));
  float* z = static_cast<float*>(be->alloc(n * 4));
  be->upload(x, x0.data(), n * 4);
  be->upload(y, y0.data(), n * 4);

  const uint64_t waits0 = mb->waits();
  be->add(y, x, n);  // queued: reads x, writes y
  be->upload(z, x1.data(), n * 4);
  check(mb->waits() == waits0, "writing a buffer no queued kernel uses does not wait");
  be->upload(x, x1.data(), n * 4);  // must wait: the queued add reads x
  check(mb->waits() == waits0 + 1, "writing a buffer a queued kernel reads waits for it");
  be->download(out.data(), y, n * 4);
  check(out[0] == 3.f && out[n - 1] == 3.f, "the queued kernel saw the old contents (y = 2 + 1)");

  be->add(y, x, n);  // y = 3 + 100, queued
  be->download(out.data(), y, n * 4);
  check(out[7] == 103.f, "reading a buffer a queued kernel writes waits for it");

  be->add(z, x, n);  // queued, uses z and x
  be->free(z);       // must wait before the memory goes back
  check(mb->waits() >= waits0 + 3, "freeing a buffer in use waits for the kernels using it");

  // Block tables are staged when the op is encoded: changing the host table afterwards must not
  // reach the queued kv_store.
  KVLayerView kv{};
  kv.format = KVFormat::BF16;
  kv.n_head_kv = 1;
  kv.head_dim_k = kv.head_dim_v = 32;
  kv.tile_dim = 32;
  kv.n_half = 1;
  kv.max_blocks = 1;
  kv.page_bytes = 16 * 32 * 2;
  kv.chunk_bytes = KV_CHUNK_PAGES * kv.page_bytes;
  kv.arena = static_cast<uint8_t*>(be->alloc(4 * kv.page_bytes));
  std::vector<uint8_t> zeros(4 * kv.page_bytes, 0);
  be->upload(kv.arena, zeros.data(), zeros.size());
  std::vector<uint32_t> table = {2, 3};  // K page 2, V page 3
  const KVTokenSlot slot{table.data(), 0};
  void* dslot = be->alloc(sizeof slot);
  be->upload(dslot, &slot, sizeof slot);
  std::vector<float> kvv(32, 1.5f);
  float* dk = static_cast<float*>(be->alloc(32 * 4));
  be->upload(dk, kvv.data(), 32 * 4);
  be->kv_store(kv, static_cast<const KVTokenSlot*>(dslot), 1, dk, dk);
  table[0] = 0;  // after encoding: the queued store must still write page 2
  table[1] = 1;
  std::vector<uint16_t> pages(4 * kv.page_bytes / 2);
  be->download(pages.data(), kv.arena, pages.size() * 2);
  const uint16_t bf = 0x3FC0;  // 1.5
  check(pages[2 * 16 * 32] == bf && pages[3 * 16 * 32] == bf && pages[0] == 0 && pages[16 * 32] == 0,
        "a queued kv_store uses the block table as it was when encoded");

  for (void* p : {(void*)x, (void*)y, (void*)kv.arena, dslot, (void*)dk}) be->free(p);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
