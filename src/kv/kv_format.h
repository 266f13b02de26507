// kv_format.h — what a cache format contributes: the size of its compressed slots, how long
// tokens stay raw, and the per-layer state its kernels need. The forward pass never sees it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kv_view.h"

namespace gaacrt {

class Backend;
struct ModelConfig;

class KVCodec {
 public:
  virtual ~KVCodec() = default;
  virtual KVFormat format() const = 0;
  virtual const char* name() const = 0;
  // Bytes of one compressed tile (16 tokens x tile_dim channels); 0 when the format has none.
  virtual uint64_t slot_bytes(int32_t tile_dim, bool is_v) const = 0;
  // Newest tokens kept raw before a full block is finalized (E8: 128; GAAC: 0 = on the 16th token).
  virtual int32_t raw_window() const { return 0; }
  // Device pointer to the format's state for one layer, or null.
  virtual const void* layer_state(int32_t layer) const { return nullptr; }
};

// Throws Error("kv", "unknown_format") for a name that is not a cache format.
KVFormat parse_kv_format(const std::string& name);
const char* kv_format_name(KVFormat f);
std::unique_ptr<KVCodec> make_codec(KVFormat f, const ModelConfig& cfg, Backend& be);

}  // namespace gaacrt
