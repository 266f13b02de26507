// lossy_codecs.cpp — LossyKVCodec: slot sizes, the E8 rotation per layer, accounting.
#include "lossy_codecs.h"

#include <algorithm>
#include <cstring>

#include "backend/backend.h"
#include "codec/scalar/kv_codec_bytes.h"
#include "common/error.h"
#include "model/config.h"

namespace gaacrt {

LossyKVCodec::LossyKVCodec(KVFormat f, const ModelConfig& cfg, Backend& be, int32_t window, bool e8_tables)
    : format_(f), be_(be), window_(window), head_dim_(cfg.head_dim_k) {
  if (window < 0) throw Error("kv", "invalid_argument", strfmt("raw window %d must not be negative", window));
  if (f != KVFormat::E8) return;
  const int32_t d = cfg.head_dim_k, L = cfg.n_layer;
  e8_.reserve(L);
  std::vector<float> rot((size_t)L * d * d);
  for (int32_t il = 0; il < L; ++il) {
    e8_.push_back(e8_layer_codec(d, il));
    std::memcpy(rot.data() + (size_t)il * d * d, e8_.back().rot.data(), (size_t)d * d * sizeof(float));
  }
  dev_rot_ = static_cast<float*>(be_.alloc(rot.size() * sizeof(float)));
  be_.upload(dev_rot_, rot.data(), rot.size() * sizeof(float));
  std::vector<E8KVLayer> layers(L);
  for (int32_t il = 0; il < L; ++il) layers[il] = {dev_rot_ + (size_t)il * d * d, e8_[il].alpha, &e8_[il], e8_tables ? 1 : 0};
  dev_layers_ = static_cast<E8KVLayer*>(be_.alloc(L * sizeof(E8KVLayer)));
  be_.upload(dev_layers_, layers.data(), L * sizeof(E8KVLayer));
}

LossyKVCodec::~LossyKVCodec() {
  if (dev_rot_) be_.free(dev_rot_);
  if (dev_layers_) be_.free(dev_layers_);
}

uint64_t LossyKVCodec::slot_bytes(int32_t tile_dim, bool is_v) const { return kv_codec_slot_bytes(format_, tile_dim, is_v); }

const void* LossyKVCodec::layer_state(int32_t layer) const { return dev_layers_ ? dev_layers_ + layer : nullptr; }

void LossyKVCodec::account(const KVFinalizeJob& job, const uint8_t*, CodecStats& into) const {
  const int32_t td = std::min(head_dim_, KV_TILE_MAX_DIM);
  if (!job.fits) {
    ++into.tiles_raw;
    return;
  }
  ++into.tiles_encoded;
  into.bf16_bytes += (uint64_t)KV_BLOCK_TOKENS * td * 2;
  into.element_bytes += (uint64_t)KV_BLOCK_TOKENS * td * 2;
  into.used_bytes += slot_bytes(td, job.is_v == 1);
}

}  // namespace gaacrt
