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

// Per-layer state in backend memory: bases[K|V][mode 0 (b3) | 1 (b4)] -> [n_head_kv][head_dim]
// bytes; a 256-dim head's tile `half` uses bases + 128 * half.
struct GaacKVLayer {
  const uint8_t* bases[2][2];
  uint32_t capacity[2];
};

class GaacKVCodec final : public KVCodec {
 public:
  GaacKVCodec(const ModelConfig& cfg, Backend& be, const KVCacheParams& p);
  ~GaacKVCodec() override;

  KVFormat format() const override { return KVFormat::GAAC; }
  const char* name() const override { return "gaac"; }
  uint64_t slot_bytes(int32_t tile_dim, bool is_v) const override;
  bool ready() const override { return calibrated_; }
  void calibrate_add(int32_t layer, const uint16_t* k, const uint16_t* v, int64_t n_tokens) override;
  void calibrate_finish(int32_t n_tokens) override;
  const void* layer_state(int32_t layer) const override { return dev_layers_ + layer; }
  void account(const KVFinalizeJob& job, const uint8_t* slot, CodecStats& into) const override;

  const GaacCalibration& calibration() const { return cal_; }
  const char* calibration_source() const { return source_; }

 private:
  void install(const GaacCalibration& c);

  Backend& be_;
  GaacModelInfo info_;
  GaacCalibration cal_;
  bool calibrated_ = false;
  const char* source_ = "online";
  std::unique_ptr<GaacCalibrator> calibrator_;
  std::vector<std::vector<uint16_t>> cal_k_, cal_v_;  // online: the first prefill's KV, per layer
  std::vector<int64_t> cal_n_;
  uint8_t* dev_bases_ = nullptr;
  GaacKVLayer* dev_layers_ = nullptr;
};

}  // namespace gaacrt
