// gaac_codec.h — the GAAC cache format (shared/spec/gaac.md) behind the KVCodec interface.
//
// Calibration, in order of preference: an explicit sidecar path, the sidecar beside the model
// ("model.gaac", refused with a clear error when made for another model), else online
// self-calibration from the first prefill's raw KV (bases fitted on those blocks, escape
// capacities chosen by measuring them, then frozen). Keys and values have separate slot classes,
// each with its own capacity C. The per-layer state the kernels read is GaacKVLayer.
#pragma once
#include <memory>
#include <vector>

#include "codec/gaac/calibration.h"
#include "kv_format.h"

namespace gaacrt {

// Per-layer state in backend memory: bases[K|V][mode 0 | 1] -> [n_head_kv][head_dim] bytes (BF16:
// b3, b4; FP8: b2, b3); a 256-dim head's tile `half` uses bases + 128 * half.
// FP8 variants (spec/gaac.md "FP8 variants"): raw pages hold each value rounded through FP8 with
// its kv-head's power-of-two scale, in BF16 and in the model's units (exact: fp8 * 2^k fits BF16),
// so attention reads raw pages as plain BF16; finalize re-derives the exact FP8 bits.
struct GaacKVLayer {
  const uint8_t* bases[2][2];
  uint32_t capacity[2];
  int32_t element;          // 0 BF16 (plain GAAC), 1 FP8 E4M3, 2 FP8 E5M2
  int32_t quantize;         // FP8: 1 once the scales exist (kv_store then rounds through FP8)
  const float* scales[2];   // FP8: [n_head_kv] power-of-two scales for K and V
};

// FP8 kind of a GaacKVLayer element (gaac_fp8_format.h GaacFp8Kind).
inline int32_t gaac_kv_fp8_kind(const GaacKVLayer& st) { return st.element == 1 ? 0 : 1; }

// The newest tokens a GAAC cache keeps raw by default (KVCacheParams::raw_window; a block is
// compressed once all of it is older). Lossless either way; 128 makes the CPU's decode of a short
// context as fast as BF16's, but the CUDA kernel reads a raw page in an L2 trip per tile where
// slots stream ahead, so on the GPU it gained nothing at short contexts and cost ~3% at 64K (two visits)
// (bench/results/cuda_h200.md, fourteenth session): 0.
constexpr int32_t GAAC_DEFAULT_WINDOW = 0;

class GaacKVCodec final : public KVCodec {
 public:
  GaacKVCodec(const ModelConfig& cfg, Backend& be, const KVCacheParams& p);
  ~GaacKVCodec() override;

  KVFormat format() const override { return format_; }
  const char* name() const override;
  uint64_t slot_bytes(int32_t tile_dim, bool is_v) const override;
  bool ready() const override { return calibrated_; }
  int32_t raw_window() const override { return window_; }
  void calibrate_add(int32_t layer, const uint16_t* k, const uint16_t* v, int64_t n_tokens) override;
  void calibrate_finish(int32_t n_tokens) override;
  const void* layer_state(int32_t layer) const override { return dev_layers_ + layer; }
  void account(const KVFinalizeJob& job, const uint8_t* slot, CodecStats& into) const override;
  bool transforms_raw_pages() const override { return element_ != GaacElement::BF16; }
  void transform_raw_page(int32_t layer, int32_t head, bool is_v, uint16_t* page, int32_t n_values) const override;

  const GaacCalibration& calibration() const { return cal_; }
  const char* calibration_source() const { return source_; }

 private:
  void install(const GaacCalibration& c);

  KVFormat format_;
  GaacElement element_;
  Backend& be_;
  GaacModelInfo info_;
  GaacCalibration cal_;
  int32_t window_;
  bool calibrated_ = false;
  const char* source_ = "online";
  std::vector<std::vector<uint16_t>> cal_k_, cal_v_;  // online: the first prefill's KV, per layer
  std::vector<int64_t> cal_n_;
  uint8_t* dev_bases_ = nullptr;
  float* dev_scales_ = nullptr;
  GaacKVLayer* dev_layers_ = nullptr;
};

}  // namespace gaacrt
