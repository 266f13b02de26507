// sidecar.cpp — the model identity and the calibration sidecar file `model.gaac`
// (shared/spec/gaac.md "Calibration": bases are stored with the model's calibration; this project
// stores them in a small binary file beside the GGUF, decided here).
//
// File layout, little-endian, version 1:
//   offset  bytes  field
//   0       8      magic "GAACCAL\x1a"
//   8       4      version (1)
//   12      4      element: 0 bf16, 1 fp8_e4m3, 2 fp8_e5m2
//   16      8      model identity (calibration.h, GaacModelInfo)
//   24      16     n_layer, n_head_kv, head_dim_k, head_dim_v (int32)
//   40      4      ctx_len (tokens per calibration prompt)
//   44      8      n_tokens (tokens seen)
//   52      12     capacity K, capacity V, capacity shared (uint32 escape bytes)
//   64      4      mode widths: narrow, wide (uint8), 2 bytes zero
//   68      28     architecture, NUL-padded
//   96      N      mode-0 bases [n_layer][K: n_head_kv x head_dim_k, V: n_head_kv x head_dim_v]
//   96+N    N      mode-1 bases, same shape
//   ...     4*S    FP8 only: scales float32 [n_layer][K|V][n_head_kv]
//   end-4   4      FNV-1a 32 of every byte before it
// Each problem on load is an Error("gaac", kind) naming the file and the value: io, bad_magic,
// unsupported_version, truncated, bad_dims, bad_size, checksum_mismatch, identity_mismatch.
#include <cstdio>
#include <cstring>
#include <memory>

#include "calibration.h"
#include "common/error.h"
#include "gguf/gguf_reader.h"
#include "model/config.h"

namespace gaacrt {
namespace {

constexpr char kMagic[8] = {'G', 'A', 'A', 'C', 'C', 'A', 'L', 0x1a};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 96;
constexpr size_t kArchBytes = 28;

uint64_t fnv1a64(uint64_t h, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
uint32_t fnv1a32(const uint8_t* p, size_t n) {
  uint32_t h = 0x811c9dc5u;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x01000193u;
  return h;
}

struct Writer {
  std::vector<uint8_t> b;
  void raw(const void* p, size_t n) { b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n); }
  void u8(uint8_t v) { b.push_back(v); }
  void u32(uint32_t v) { for (int k = 0; k < 4; ++k) b.push_back(static_cast<uint8_t>(v >> (8 * k))); }
  void u64(uint64_t v) { for (int k = 0; k < 8; ++k) b.push_back(static_cast<uint8_t>(v >> (8 * k))); }
};

uint32_t rd32(const uint8_t* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24); }
uint64_t rd64(const uint8_t* p) { return rd32(p) | (static_cast<uint64_t>(rd32(p + 4)) << 32); }

[[noreturn]] void fail(const std::string& kind, const std::string& path, const std::string& what) {
  throw Error("gaac", kind, path + ": " + what);
}

}  // namespace

// The private parts of GaacCalibration the file reads and writes.
struct GaacSidecarIO {
  static std::vector<uint8_t> encode(const GaacCalibration& c) {
    const GaacModelInfo& m = c.model_;
    Writer w;
    w.raw(kMagic, 8);
    w.u32(kVersion);
    w.u32(static_cast<uint32_t>(c.element_));
    w.u64(m.identity);
    w.u32(m.n_layer); w.u32(m.n_head_kv); w.u32(m.head_dim_k); w.u32(m.head_dim_v);
    w.u32(static_cast<uint32_t>(c.ctx_len));
    w.u64(c.n_tokens);
    w.u32(c.capacity_[0]); w.u32(c.capacity_[1]); w.u32(c.capacity_shared_);
    w.u8(static_cast<uint8_t>(c.w_narrow_)); w.u8(static_cast<uint8_t>(c.w_wide_)); w.u8(0); w.u8(0);
    char arch[kArchBytes] = {};
    std::memcpy(arch, m.arch.data(), std::min(m.arch.size(), kArchBytes - 1));
    w.raw(arch, kArchBytes);
    w.raw(c.bases_[0].data(), c.bases_[0].size());
    w.raw(c.bases_[1].data(), c.bases_[1].size());
    for (float s : c.scales_) { uint32_t u; std::memcpy(&u, &s, 4); w.u32(u); }
    w.u32(fnv1a32(w.b.data(), w.b.size()));
    return w.b;
  }

  static GaacCalibration decode(const std::vector<uint8_t>& b, const std::string& path) {
    if (b.size() < 12) fail("truncated", path, strfmt("%zu bytes, shorter than the magic and version", b.size()));
    if (std::memcmp(b.data(), kMagic, 8) != 0) fail("bad_magic", path, "not a GAAC calibration file (bad magic)");
    const uint32_t version = rd32(&b[8]);
    if (version != kVersion)
      fail("unsupported_version", path, strfmt("calibration file version %u, this build reads version %u", version, kVersion));
    if (b.size() < kHeaderBytes + 4)
      fail("truncated", path, strfmt("%zu bytes, shorter than the %zu-byte header", b.size(), kHeaderBytes + 4));
    const uint32_t el = rd32(&b[12]);
    if (el > 2) fail("bad_dims", path, strfmt("unknown element type %u", el));
    GaacModelInfo m;
    m.identity = rd64(&b[16]);
    m.n_layer = static_cast<int32_t>(rd32(&b[24]));
    m.n_head_kv = static_cast<int32_t>(rd32(&b[28]));
    m.head_dim_k = static_cast<int32_t>(rd32(&b[32]));
    m.head_dim_v = static_cast<int32_t>(rd32(&b[36]));
    const auto in_range = [](int32_t v, int32_t hi) { return v > 0 && v <= hi; };
    if (!in_range(m.n_layer, 4096) || !in_range(m.n_head_kv, 4096) || !in_range(m.head_dim_k, 4096) ||
        !in_range(m.head_dim_v, 4096))
      fail("bad_dims", path, strfmt("dims out of range: n_layer %d, n_head_kv %d, head dims %d/%d", m.n_layer,
                                    m.n_head_kv, m.head_dim_k, m.head_dim_v));
    const char* arch = reinterpret_cast<const char*>(&b[68]);
    m.arch.assign(arch, strnlen(arch, kArchBytes));
    const int32_t wn = b[64], ww = b[65];
    if (wn < 1 || ww <= wn || ww > 8) fail("bad_dims", path, strfmt("mode widths %d/%d", wn, ww));
    GaacCalibration c(m, static_cast<GaacElement>(el), wn, ww);
    const size_t nb = c.bases_[0].size(), ns = c.scales_.size();
    const size_t want = kHeaderBytes + 2 * nb + 4 * ns + 4;
    if (b.size() < want)
      fail("truncated", path, strfmt("%zu bytes, the header's dims need %zu", b.size(), want));
    if (b.size() > want)
      fail("bad_size", path, strfmt("%zu bytes, the header's dims need %zu (trailing data)", b.size(), want));
    const uint32_t sum = rd32(&b[want - 4]), got = fnv1a32(b.data(), want - 4);
    if (sum != got) fail("checksum_mismatch", path, strfmt("checksum 0x%08x, content hashes to 0x%08x (corrupt file)", sum, got));
    c.ctx_len = static_cast<int32_t>(rd32(&b[40]));
    c.n_tokens = rd64(&b[44]);
    c.capacity_[0] = rd32(&b[52]);
    c.capacity_[1] = rd32(&b[56]);
    c.capacity_shared_ = rd32(&b[60]);
    std::memcpy(c.bases_[0].data(), &b[kHeaderBytes], nb);
    std::memcpy(c.bases_[1].data(), &b[kHeaderBytes + nb], nb);
    for (size_t k = 0; k < ns; ++k) {
      const uint32_t u = rd32(&b[kHeaderBytes + 2 * nb + 4 * k]);
      std::memcpy(&c.scales_[k], &u, 4);
    }
    return c;
  }
};

GaacModelInfo gaac_model_info(const GGUFFile& f) {
  const ModelConfig cfg = load_config(f);
  GaacModelInfo m;
  m.arch = cfg.arch;
  m.n_layer = cfg.n_layer;
  m.n_head_kv = cfg.n_head_kv;
  m.head_dim_k = cfg.head_dim_k;
  m.head_dim_v = cfg.head_dim_v;
  uint64_t h = 0xcbf29ce484222325ull;
  const char tag[] = "gaac-identity-v1";
  h = fnv1a64(h, tag, sizeof tag);
  h = fnv1a64(h, m.arch.c_str(), m.arch.size() + 1);
  const int32_t dims[4] = {m.n_layer, m.n_head_kv, m.head_dim_k, m.head_dim_v};
  for (int32_t d : dims) {
    const uint8_t le[4] = {static_cast<uint8_t>(d), static_cast<uint8_t>(d >> 8), static_cast<uint8_t>(d >> 16),
                           static_cast<uint8_t>(d >> 24)};
    h = fnv1a64(h, le, 4);
  }
  for (const GGUFTensorInfo& t : f.tensors()) {
    h = fnv1a64(h, t.name.c_str(), t.name.size() + 1);
    uint8_t rec[8 + 8 * 4];
    const uint32_t ty = static_cast<uint32_t>(t.type);
    for (int k = 0; k < 4; ++k) rec[k] = static_cast<uint8_t>(ty >> (8 * k));
    for (int k = 0; k < 4; ++k) rec[4 + k] = static_cast<uint8_t>(t.n_dims >> (8 * k));
    for (uint32_t d = 0; d < 4; ++d)
      for (int k = 0; k < 8; ++k) rec[8 + 8 * d + k] = static_cast<uint8_t>(static_cast<uint64_t>(t.ne[d]) >> (8 * k));
    h = fnv1a64(h, rec, 8 + 8 * static_cast<size_t>(t.n_dims));
  }
  m.identity = h;
  return m;
}

std::string gaac_sidecar_path(const std::string& model_path) {
  const std::string ext = ".gguf";
  if (model_path.size() >= ext.size() && model_path.compare(model_path.size() - ext.size(), ext.size(), ext) == 0)
    return model_path.substr(0, model_path.size() - ext.size()) + ".gaac";
  return model_path + ".gaac";
}

void GaacCalibration::save(const std::string& path) const {
  const std::vector<uint8_t> b = GaacSidecarIO::encode(*this);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) fail("io", path, "cannot open for writing");
  if (std::fwrite(b.data(), 1, b.size(), f.get()) != b.size()) fail("io", path, "short write");
  if (std::fflush(f.get()) != 0) fail("io", path, "write failed");
}

GaacCalibration GaacCalibration::load(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail("io", path, "cannot open the calibration file");
  std::vector<uint8_t> b;
  uint8_t buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) {
    b.insert(b.end(), buf, buf + n);
    if (b.size() > (size_t(1) << 30)) fail("bad_size", path, "larger than 1 GiB: not a calibration file");
  }
  if (std::ferror(f.get())) fail("io", path, "read error");
  return GaacSidecarIO::decode(b, path);
}

GaacCalibration GaacCalibration::load(const std::string& path, const GaacModelInfo& model) {
  GaacCalibration c = load(path);
  c.check_model(model, path);
  return c;
}

void GaacCalibration::check_model(const GaacModelInfo& m, const std::string& where) const {
  const GaacModelInfo& c = model_;
  if (c.identity == m.identity && c.n_layer == m.n_layer && c.n_head_kv == m.n_head_kv &&
      c.head_dim_k == m.head_dim_k && c.head_dim_v == m.head_dim_v)
    return;
  fail("identity_mismatch", where,
       strfmt("calibrated for another model (%s, %d layers, %d kv-heads, head dims %d/%d, identity %016llx); "
              "this model is %s, %d layers, %d kv-heads, head dims %d/%d, identity %016llx",
              c.arch.c_str(), c.n_layer, c.n_head_kv, c.head_dim_k, c.head_dim_v,
              static_cast<unsigned long long>(c.identity), m.arch.c_str(), m.n_layer, m.n_head_kv, m.head_dim_k,
              m.head_dim_v, static_cast<unsigned long long>(m.identity)));
}

}  // namespace gaacrt
