// kv_format.cpp — format names and the codec factory.
#include "kv_format.h"

#include "codec/e8/e8_layout.h"
#include "common/error.h"
#include "gaac_codec.h"
#include "kv_cache.h"
#include "lossy_codecs.h"

namespace gaacrt {
namespace {

class Bf16Codec final : public KVCodec {
 public:
  KVFormat format() const override { return KVFormat::BF16; }
  const char* name() const override { return "bf16"; }
  uint64_t slot_bytes(int32_t, bool) const override { return 0; }
};

struct Named { KVFormat f; const char* name; };
constexpr Named kNames[] = {
  {KVFormat::BF16, "bf16"}, {KVFormat::GAAC, "gaac"}, {KVFormat::E8, "e8"}, {KVFormat::Q8, "q8"},
  {KVFormat::KIVI2, "kivi2"}, {KVFormat::FP8_E4M3_GAAC, "fp8_e4m3+gaac"}, {KVFormat::FP8_E5M2_GAAC, "fp8_e5m2+gaac"},
};

}  // namespace

E8Center parse_e8_center(const std::string& name) {
  if (name == "off") return E8Center::Off;
  if (name == "global") return E8Center::Global;
  if (name == "block") return E8Center::Block;
  throw Error("kv", "invalid_argument", strfmt("e8_center '%s': expected 'off', 'global' or 'block'", name.c_str()));
}

const char* e8_center_name(E8Center c) {
  return c == E8Center::Global ? "global" : (c == E8Center::Block ? "block" : "off");
}

KVFormat parse_kv_format(const std::string& name) {
  for (const Named& n : kNames)
    if (name == n.name) return n.f;
  throw Error("kv", "unknown_format", strfmt("unknown cache format '%s' (known: bf16, gaac, e8, q8, kivi2, "
                                             "fp8_e4m3+gaac, fp8_e5m2+gaac)", name.c_str()));
}

const char* kv_format_name(KVFormat f) {
  for (const Named& n : kNames)
    if (n.f == f) return n.name;
  return "?";
}

std::unique_ptr<KVCodec> make_codec(KVFormat f, const ModelConfig& cfg, Backend& be, const KVCacheParams& p) {
  if (f == KVFormat::BF16) return std::make_unique<Bf16Codec>();
  if (f == KVFormat::GAAC || f == KVFormat::FP8_E4M3_GAAC || f == KVFormat::FP8_E5M2_GAAC)
    return std::make_unique<GaacKVCodec>(cfg, be, p);
  if (f == KVFormat::E8 || f == KVFormat::KIVI2 || f == KVFormat::Q8) {
    // The residual window (spec/e8.md §8): 128 tokens for E8 and KIVI; q8 quantizes a block as
    // soon as it is full, like llama.cpp's q8_0 cache (which has no window).
    const int32_t window = p.raw_window >= 0 ? p.raw_window : (f == KVFormat::Q8 ? 0 : E8_DEFAULT_WINDOW);
    if (p.e8_scoring != "decode" && p.e8_scoring != "table")
      throw Error("kv", "invalid_argument", strfmt("e8_scoring '%s': expected 'decode' or 'table'", p.e8_scoring.c_str()));
    return std::make_unique<LossyKVCodec>(f, cfg, be, window, p.e8_scoring == "table", p.e8_center);
  }
  throw Error("kv", "unsupported_format", strfmt("cache format '%s' is not implemented yet", kv_format_name(f)));
}

}  // namespace gaacrt
