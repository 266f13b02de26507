// lossy_codecs.cpp — LossyKVCodec: slot sizes, the E8 rotation per layer, accounting.
#include "lossy_codecs.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/backend.h"
#include "codec/scalar/kv_codec_bytes.h"
#include "codec/e8/e8_layout.h"
#include "codec/e8/e8_rotation.h"
#include "common/error.h"
#include "common/half.h"
#include "model/config.h"

namespace gaacrt {

namespace {
// Block centering scales channels by their within-block std^0.75: by attention KL in the serving
// state on SmolLM2-135M and Gemma-3-270M (bench/e8_center_probe.py), powers 0.5, 0.75 and 1 are
// close; without a scale Gemma-3 loses most of the gain (its key channels' spreads differ widely,
// and the lattice's error is the same in every channel of the rotated basis).
constexpr double kBlockScalePow = 0.75;
}  // namespace

LossyKVCodec::LossyKVCodec(KVFormat f, const ModelConfig& cfg, Backend& be, int32_t window, bool e8_tables,
                           E8Center e8_center)
    : format_(f), be_(be), window_(window), head_dim_(cfg.head_dim_k), tables_(e8_tables),
      center_(f == KVFormat::E8 ? e8_center : E8Center::Off), n_layer_(cfg.n_layer), n_head_kv_(cfg.n_head_kv) {
  if (window < 0) throw Error("kv", "invalid_argument", strfmt("raw window %d must not be negative", window));
  if (center_ == E8Center::Block && be.device().backend != "cpu")
    throw Error("kv", "unsupported_format", strfmt("E8 block centering (e8_center=block) is implemented on the CPU "
                                                   "backend only, not on %s", be.device().backend.c_str()));
  if (f != KVFormat::E8) return;
  const int32_t d = cfg.head_dim_k, L = cfg.n_layer;
  e8_.reserve(L);
  std::vector<float> rot((size_t)L * d * d);
  for (int32_t il = 0; il < L; ++il) {
    e8_.push_back(e8_layer_codec(d, il, E8_DEFAULT_SEED, center_ == E8Center::Block));
    std::memcpy(rot.data() + (size_t)il * d * d, e8_.back().rot.data(), (size_t)d * d * sizeof(float));
  }
  dev_rot_ = static_cast<float*>(be_.alloc(rot.size() * sizeof(float)));
  be_.upload(dev_rot_, rot.data(), rot.size() * sizeof(float));
  dev_layers_ = static_cast<E8KVLayer*>(be_.alloc(L * sizeof(E8KVLayer)));
  upload_layers();
}

void LossyKVCodec::upload_layers() {
  const int32_t L = n_layer_, d = head_dim_;
  const size_t per_layer = (size_t)n_head_kv_ * d;
  std::vector<E8KVLayer> layers(L);
  for (int32_t il = 0; il < L; ++il) {
    layers[il] = {dev_rot_ + (size_t)il * d * d, e8_[il].alpha, &e8_[il], tables_ ? 1 : 0, nullptr, nullptr, nullptr,
                  center_ == E8Center::Block ? 1 : 0};
    if (centered_) {
      layers[il].mean = dev_mean_ + il * per_layer;
      layers[il].mean_rot = dev_mean_ + (L + il) * per_layer;
      layers[il].scale = dev_mean_ + (2 * L + il) * per_layer;
    }
  }
  be_.upload(dev_layers_, layers.data(), L * sizeof(E8KVLayer));
}

void LossyKVCodec::calibrate_add(int32_t layer, const uint16_t* k, const uint16_t*, int64_t n_tokens) {
  const int32_t d = head_dim_, H = n_head_kv_;
  const size_t per_layer = (size_t)H * d;
  if (mean_.empty()) mean_.assign(3 * n_layer_ * per_layer, 0.f);
  for (int32_t h = 0; h < H; ++h) {
    float* mu = mean_.data() + layer * per_layer + h * d;
    float* sc = mean_.data() + (2 * n_layer_ + layer) * per_layer + h * d;
    std::vector<double> acc(d, 0.0), acc2(d, 0.0);
    if (center_ == E8Center::Block) {
      // The blocks' own means do the centering (mean stays 0); the scale is the spread around
      // them: per channel, the std of k minus its 16-token block's mean, to the power 0.75.
      for (int64_t b0 = 0; b0 < n_tokens; b0 += KV_BLOCK_TOKENS) {
        const int64_t b1 = std::min<int64_t>(n_tokens, b0 + KV_BLOCK_TOKENS);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t t = b0; t < b1; ++t)
          for (int32_t c = 0; c < d; ++c) acc[c] += bf16_to_f32(k[(t * H + h) * d + c]);
        for (int64_t t = b0; t < b1; ++t)
          for (int32_t c = 0; c < d; ++c) {
            const double x = bf16_to_f32(k[(t * H + h) * d + c]) - acc[c] / (double)(b1 - b0);
            acc2[c] += x * x;
          }
      }
      for (int32_t c = 0; c < d; ++c) {
        mu[c] = 0.f;
        sc[c] = (float)std::pow(std::sqrt(n_tokens ? acc2[c] / (double)n_tokens : 0.0) + 1e-6, kBlockScalePow);
      }
      continue;
    }
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int32_t c = 0; c < d; ++c) {
        const double x = bf16_to_f32(k[(t * H + h) * d + c]);
        acc[c] += x;
        acc2[c] += x * x;
      }
    for (int32_t c = 0; c < d; ++c) {
      const double m = n_tokens ? acc[c] / (double)n_tokens : 0.0;
      const double var = n_tokens ? std::max(0.0, acc2[c] / (double)n_tokens - m * m) : 0.0;
      mu[c] = (float)m;
      // Half-way to whitening: measured on Gemma-3 (bench/e8_quality.py), scale = std^0.5 beat
      // std^0 (centering alone), 0.25, 0.75 and 1 on attention KL, and gained on perplexity.
      sc[c] = (float)std::sqrt(std::sqrt(var) + 1e-6);
    }
  }
}

void LossyKVCodec::calibrate_finish(int32_t) {
  const int32_t d = head_dim_, H = n_head_kv_, L = n_layer_;
  const size_t per_layer = (size_t)H * d;
  std::vector<float> ms(per_layer);
  for (int32_t il = 0; il < L; ++il) {  // R (mean / scale): the mean in the basis the lattice codes live in
    for (size_t i = 0; i < per_layer; ++i) ms[i] = mean_[il * per_layer + i] / mean_[(2 * L + il) * per_layer + i];
    e8_rotate(e8_[il].rot.data(), d, ms.data(), H, mean_.data() + (L + il) * per_layer);
  }
  dev_mean_ = static_cast<float*>(be_.alloc(mean_.size() * sizeof(float)));
  be_.upload(dev_mean_, mean_.data(), mean_.size() * sizeof(float));
  centered_ = true;
  upload_layers();
}

LossyKVCodec::~LossyKVCodec() {
  if (dev_mean_) be_.free(dev_mean_);
  if (dev_rot_) be_.free(dev_rot_);
  if (dev_layers_) be_.free(dev_layers_);
}

uint64_t LossyKVCodec::slot_bytes(int32_t tile_dim, bool is_v) const {
  // Block centering adds the fp16 block mean to each E8 key slot (e8_layout.h).
  if (center_ == E8Center::Block && !is_v) return e8_kc_slot_bytes(tile_dim);
  return kv_codec_slot_bytes(format_, tile_dim, is_v);
}

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
