// lossy_codecs.h — the fixed-slot lossy cache formats behind the KVCodec interface
// (shared/spec/e8.md): E8 k2v2 (lattice keys in a rotated basis, 2-bit values), and the scalar
// baselines q8 (llama.cpp's q8_0 per 32 channels) and kivi2 (KIVI: 2-bit keys per channel over a
// block, 2-bit values per token). Tiles stay raw BF16 inside the residual window (the newest W
// tokens, plus up to 15 more: a block is encoded once all of it is older than the window).
#pragma once
#include <memory>
#include <vector>

#include "codec/e8/e8_keys.h"
#include "kv_format.h"

namespace gaacrt {

// Per-layer state of E8 in backend memory: the rotation R (d x d, row-major: k~ = R k), alpha,
// and (CPU) the host codec the encoders use.
struct E8KVLayer {
  const float* rot;
  float alpha;
  const E8LayerCodec* host;
  int32_t score_tables;   // 1: the paper's per-query lookup tables (A) on decode steps; 0: decode-in-dot (B)
  // Key centering (options, not in the paper; kv_format.h E8Center): per kv-head mean key,
  // subtracted before encoding and added back on decode, (n_head_kv, d) in the original and the
  // rotated basis (zero with block centering, whose means live in the slots); null when off.
  const float* mean;
  const float* mean_rot;
  // With centering, also a per-channel key scale s (n_head_kv, d), original basis: the lattice codes
  // R (k - mean) / s, queries are rotated as R (s * q) and mean_rot is R (mean / s). Null when off.
  // Global: s = sqrt(std); block: s = (within-block std)^0.75.
  const float* scale;
  // Block centering: 1 when key slots carry their block's fp16 mean (rotated basis, e8_layout.h):
  // the lattice codes k~ - m~ for the tokens marked centered, and decoding adds m~ back to them.
  int32_t block_mean;
};

class LossyKVCodec final : public KVCodec {
 public:
  LossyKVCodec(KVFormat f, const ModelConfig& cfg, Backend& be, int32_t window, bool e8_tables = false,
               E8Center e8_center = E8Center::Off);
  ~LossyKVCodec() override;

  KVFormat format() const override { return format_; }
  const char* name() const override { return kv_format_name(format_); }
  uint64_t slot_bytes(int32_t tile_dim, bool is_v) const override;
  int32_t raw_window() const override { return window_; }
  const void* layer_state(int32_t layer) const override;
  void account(const KVFinalizeJob& job, const uint8_t* slot, CodecStats& into) const override;
  bool lossless() const override { return false; }
  // E8 with centering fits its per-head mean and scale on the first prefill, then freezes them.
  bool ready() const override { return center_ == E8Center::Off || centered_; }
  void calibrate_add(int32_t layer, const uint16_t* k, const uint16_t* v, int64_t n_tokens) override;
  void calibrate_finish(int32_t n_tokens) override;

 private:
  KVFormat format_;
  Backend& be_;
  int32_t window_;
  int32_t head_dim_;
  std::vector<E8LayerCodec> e8_;       // host codecs (E8)
  float* dev_rot_ = nullptr;           // (n_layer, d, d)
  E8KVLayer* dev_layers_ = nullptr;
  void upload_layers();
  bool tables_ = false, centered_ = false;
  E8Center center_ = E8Center::Off;
  int32_t n_layer_ = 0, n_head_kv_ = 0;
  std::vector<float> mean_;            // (3, n_layer, n_head_kv, d): mean, then R (mean / scale), then scale
  float* dev_mean_ = nullptr;          // (3, n_layer, n_head_kv, d)
};

}  // namespace gaacrt
