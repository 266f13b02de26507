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
};

class LossyKVCodec final : public KVCodec {
 public:
  LossyKVCodec(KVFormat f, const ModelConfig& cfg, Backend& be, int32_t window, bool e8_tables = false);
  ~LossyKVCodec() override;

  KVFormat format() const override { return format_; }
  const char* name() const override { return kv_format_name(format_); }
  uint64_t slot_bytes(int32_t tile_dim, bool is_v) const override;
  int32_t raw_window() const override { return window_; }
  const void* layer_state(int32_t layer) const override;
  void account(const KVFinalizeJob& job, const uint8_t* slot, CodecStats& into) const override;
  bool lossless() const override { return false; }

 private:
  KVFormat format_;
  Backend& be_;
  int32_t window_;
  int32_t head_dim_;
  std::vector<E8LayerCodec> e8_;       // host codecs (E8)
  float* dev_rot_ = nullptr;           // (n_layer, d, d)
  E8KVLayer* dev_layers_ = nullptr;
};

}  // namespace gaacrt
