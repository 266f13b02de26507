// gaac_codec.cpp — GAAC calibration sources and the per-layer state for the kernels.
#include "gaac_codec.h"

#include <cstring>
#include <filesystem>

#include "backend/backend.h"
#include "codec/gaac/gaac_format.h"
#include "common/error.h"
#include "common/log.h"
#include "gguf/gguf_reader.h"
#include "kv_cache.h"

namespace gaacrt {

GaacKVCodec::GaacKVCodec(const ModelConfig& cfg, Backend& be, const KVCacheParams& p) : be_(be) {
  info_.arch = cfg.arch;
  info_.n_layer = cfg.n_layer;
  info_.n_head_kv = cfg.n_head_kv;
  info_.head_dim_k = cfg.head_dim_k;
  info_.head_dim_v = cfg.head_dim_v;
  dev_layers_ = static_cast<GaacKVLayer*>(be_.alloc(sizeof(GaacKVLayer) * cfg.n_layer));
  std::string path = p.calibration;
  if (path.empty() && !p.model_path.empty()) {
    const std::string beside = gaac_sidecar_path(p.model_path);
    if (std::filesystem::exists(beside)) path = beside;
  }
  if (!path.empty()) {
    // The identity of the model comes from its GGUF tensor table (calibration.h).
    GaacModelInfo model = info_;
    if (!p.model_path.empty()) model = gaac_model_info(GGUFFile(p.model_path));
    install(GaacCalibration::load(path, model));
    source_ = p.calibration.empty() ? "sidecar" : "explicit";
    log(LogLevel::Info, "gaac: calibration from %s", path.c_str());
  } else {
    calibrator_ = std::make_unique<GaacCalibrator>(info_);
    cal_k_.resize(cfg.n_layer);
    cal_v_.resize(cfg.n_layer);
    cal_n_.assign(cfg.n_layer, 0);
  }
}

GaacKVCodec::~GaacKVCodec() {
  if (dev_bases_) be_.free(dev_bases_);
  be_.free(dev_layers_);
}

uint64_t GaacKVCodec::slot_bytes(int32_t tile_dim, bool is_v) const {
  return calibrated_ ? gaac_slot_bytes(tile_dim, cal_.capacity(is_v)) : 0;
}

void GaacKVCodec::calibrate_add(int32_t layer, const uint16_t* k, const uint16_t* v, int64_t n_tokens) {
  calibrator_->add(layer, false, k, n_tokens);
  calibrator_->add(layer, true, v, n_tokens);
  const size_t n = (size_t)n_tokens * info_.n_head_kv * info_.head_dim_k;
  cal_k_[layer].assign(k, k + n);
  cal_v_[layer].assign(v, v + n);
  cal_n_[layer] = n_tokens;
}

void GaacKVCodec::calibrate_finish(int32_t n_tokens) {
  GaacCalibration c = calibrator_->finish(n_tokens);
  // Escape capacities: the C minimizing expected resident bytes over the same blocks.
  GaacStats sk, sv;
  for (int32_t il = 0; il < info_.n_layer; ++il) {
    gaac_measure(c, il, false, cal_k_[il].data(), cal_n_[il], sk);
    gaac_measure(c, il, true, cal_v_[il].data(), cal_n_[il], sv);
  }
  if (sk.tiles == 0) {
    // Fewer than 16 tokens in every layer: nothing to measure; a generous capacity (a quarter of
    // the worst case) keeps typical tiles compressible until a calibration file is used.
    const uint32_t d = (uint32_t)info_.tile_dim(false);
    c.set_capacities(d / 2, d / 2, d / 2);
  } else {
    c.set_capacities(sk, sv);
  }
  install(c);
  calibrator_.reset();
  cal_k_.clear();
  cal_v_.clear();
  log(LogLevel::Info, "gaac: calibrated online on %d tokens (capacity K %u, V %u bytes)", n_tokens, c.capacity(false),
      c.capacity(true));
}

// Uploads the bases as one block [layer][K|V][mode][n_head_kv * head_dim] and points each layer's
// state at its part.
void GaacKVCodec::install(const GaacCalibration& c) {
  cal_ = c;
  const int32_t L = info_.n_layer, H = info_.n_head_kv, d = info_.head_dim_k;
  const size_t per = (size_t)H * d;
  std::vector<uint8_t> host((size_t)L * 4 * per);
  std::vector<GaacKVLayer> layers(L);
  if (!dev_bases_) dev_bases_ = static_cast<uint8_t*>(be_.alloc(host.size()));
  for (int32_t il = 0; il < L; ++il)
    for (int is_v = 0; is_v < 2; ++is_v)
      for (int mode = 0; mode < 2; ++mode) {
        const size_t off = (((size_t)il * 2 + is_v) * 2 + mode) * per;
        for (int32_t h = 0; h < H; ++h) std::memcpy(host.data() + off + (size_t)h * d, c.bases(mode, il, is_v, h), d);
        layers[il].bases[is_v][mode] = dev_bases_ + off;
        layers[il].capacity[is_v] = c.capacity(is_v);
      }
  be_.upload(dev_bases_, host.data(), host.size());
  be_.upload(dev_layers_, layers.data(), layers.size() * sizeof(GaacKVLayer));
  calibrated_ = true;
}

void GaacKVCodec::account(const KVFinalizeJob& job, const uint8_t* slot, CodecStats& into) const {
  const int32_t d = info_.tile_dim(job.is_v);
  if (!job.fits) {
    ++into.tiles_raw;
    return;
  }
  ++into.tiles_encoded;
  into.bf16_bytes += gaac_raw_tile_bytes(d);
  into.used_bytes += gaac_fixed_bytes(d) + (uint32_t)job.escape_bytes;
  if (slot) {
    const GaacModeCounts m = gaac_tile_modes(slot, d);
    into.groups[0] += m.n3;
    into.groups[1] += m.n4;
    into.groups[2] += m.nraw;
  }
}

}  // namespace gaacrt
