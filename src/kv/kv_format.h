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
struct KVCacheParams;

// E8 key centering, options beside the paper's method (bench/results/e8_quality_options.md):
//   Off     the paper's keys
//   Global  (k - mean) / sqrt(std) per channel, mean and std fitted on the first prefill
//   Block   per 16-token block, the block's own mean (rotated basis, fp16 per channel, in the slot)
//           is subtracted from every key it brings closer to zero; channels are scaled by their
//           within-block std^0.75, fitted on the first prefill; alpha x 0.8. 100 B per token-head
//           at d = 128 (the paper's 84 + 16 of means), CPU only.
enum class E8Center : int32_t { Off = 0, Global = 1, Block = 2 };
E8Center parse_e8_center(const std::string& name);  // "off", "global", "block"
const char* e8_center_name(E8Center c);

// What a format measured while finalizing tiles (per K or V), for kv_stats().
struct CodecStats {
  uint64_t tiles_encoded = 0;    // tiles that moved into slots
  uint64_t tiles_raw = 0;        // tiles that stayed raw (did not fit, or no room for a slot)
  uint64_t groups[3] = {0, 0, 0};  // GAAC: 3-bit / 4-bit / raw groups of the encoded tiles
  uint64_t used_bytes = 0;       // bytes the encodings actually use (fixed parts + escapes)
  uint64_t bf16_bytes = 0;       // BF16 bytes of the encoded tiles
  uint64_t element_bytes = 0;    // the same tiles in the format's element type (FP8: 1 byte each)
};

class KVCodec {
 public:
  virtual ~KVCodec() = default;
  virtual KVFormat format() const = 0;
  virtual const char* name() const = 0;
  // Bytes of one compressed tile (16 tokens x tile_dim channels); 0 when the format has none or
  // is not calibrated yet.
  virtual uint64_t slot_bytes(int32_t tile_dim, bool is_v) const = 0;
  // Newest tokens kept raw before a full block is finalized (E8: 128; GAAC: 0 = on the 16th token).
  virtual int32_t raw_window() const { return 0; }
  // False while the format still needs an online calibration from the first prefill's raw KV.
  virtual bool ready() const { return true; }
  // Online calibration: one layer's K and V as BF16 bits [n_tokens][n_head_kv][head_dim] each,
  // layer by layer, then finish(). Called once, before the first finalize.
  virtual void calibrate_add(int32_t layer, const uint16_t* k, const uint16_t* v, int64_t n_tokens) {}
  virtual void calibrate_finish(int32_t n_tokens) {}
  // Device pointer to the format's state for one layer, or null.
  virtual const void* layer_state(int32_t layer) const { return nullptr; }
  // After kv_finalize: account one job's outcome (reads the slot on host-memory backends).
  virtual void account(const KVFinalizeJob& job, const uint8_t* slot, CodecStats& into) const {}
  // Can the tiles of a compressed block be restored exactly (truncate inside it keeps the cache)?
  virtual bool lossless() const { return true; }
  // Formats whose raw pages hold transformed values (FP8 rounding): after an online calibration,
  // every raw page stored before it is rewritten through transform_raw_page (BF16 in place).
  virtual bool transforms_raw_pages() const { return false; }
  virtual void transform_raw_page(int32_t layer, int32_t head, bool is_v, uint16_t* page, int32_t n_values) const {}
};

// Throws Error("kv", "unknown_format") for a name that is not a cache format.
KVFormat parse_kv_format(const std::string& name);
const char* kv_format_name(KVFormat f);
std::unique_ptr<KVCodec> make_codec(KVFormat f, const ModelConfig& cfg, Backend& be, const KVCacheParams& p);

}  // namespace gaacrt
