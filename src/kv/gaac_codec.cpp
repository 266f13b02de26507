// gaac_codec.cpp — GAAC (BF16, and FP8 E4M3/E5M2 underneath) as a cache format: calibration
// sources and the per-layer state for the kernels.
#include "gaac_codec.h"

#include <cstring>
#include <filesystem>

#include "backend/backend.h"
#include "codec/gaac/fp8_codec.h"
#include "codec/gaac/gaac_format.h"
#include "codec/gaac/gaac_fp8_format.h"
#include "common/error.h"
#include "common/half.h"
#include "common/log.h"
#include "gguf/gguf_reader.h"
#include "kv_cache.h"

namespace gaacrt {
namespace {

GaacElement element_of(KVFormat f) {
  if (f == KVFormat::FP8_E4M3_GAAC) return GaacElement::FP8_E4M3;
  if (f == KVFormat::FP8_E5M2_GAAC) return GaacElement::FP8_E5M2;
  return GaacElement::BF16;
}

}  // namespace

GaacKVCodec::GaacKVCodec(const ModelConfig& cfg, Backend& be, const KVCacheParams& p)
    : format_(p.format), element_(element_of(p.format)), be_(be),
      window_(p.raw_window >= 0 ? p.raw_window : GAAC_DEFAULT_WINDOW) {
  info_.arch = cfg.arch;
  info_.n_layer = cfg.n_layer;
  info_.n_head_kv = cfg.n_head_kv;
  info_.head_dim_k = cfg.head_dim_k;
  info_.head_dim_v = cfg.head_dim_v;
  dev_layers_ = static_cast<GaacKVLayer*>(be_.alloc(sizeof(GaacKVLayer) * cfg.n_layer));
  // Until calibrated: no quantization in kv_store, no slots.
  std::vector<GaacKVLayer> idle(cfg.n_layer, GaacKVLayer{{{nullptr, nullptr}, {nullptr, nullptr}}, {0, 0},
                                                         (int32_t)element_, 0, {nullptr, nullptr}});
  be_.upload(dev_layers_, idle.data(), idle.size() * sizeof(GaacKVLayer));
  std::string path = p.calibration;
  if (path.empty() && !p.model_path.empty()) {
    const std::string beside = gaac_sidecar_path(p.model_path);
    if (std::filesystem::exists(beside)) path = beside;
  }
  if (!path.empty()) {
    // The identity of the model comes from its GGUF tensor table (calibration.h).
    GaacModelInfo model = info_;
    if (!p.model_path.empty()) model = gaac_model_info(GGUFFile(p.model_path));
    GaacCalibration c = GaacCalibration::load(path, model);
    if (c.element() != element_) {
      if (!p.calibration.empty())
        throw Error("gaac", "wrong_element", strfmt("%s: a %s calibration cannot serve the %s cache format", path.c_str(),
                                                    gaac_element_name(c.element()), kv_format_name(format_)));
      path.clear();  // the sidecar beside the model is for another element type: calibrate online
    } else {
      install(c);
      source_ = p.calibration.empty() ? "sidecar" : "explicit";
      log(LogLevel::Info, "gaac: calibration from %s", path.c_str());
    }
  }
  if (!calibrated_) {
    cal_k_.resize(cfg.n_layer);
    cal_v_.resize(cfg.n_layer);
    cal_n_.assign(cfg.n_layer, 0);
  }
}

GaacKVCodec::~GaacKVCodec() {
  if (dev_bases_) be_.free(dev_bases_);
  if (dev_scales_) be_.free(dev_scales_);
  be_.free(dev_layers_);
}

const char* GaacKVCodec::name() const { return kv_format_name(format_); }

uint64_t GaacKVCodec::slot_bytes(int32_t tile_dim, bool is_v) const {
  if (!calibrated_) return 0;
  if (element_ == GaacElement::BF16) return gaac_slot_bytes(tile_dim, cal_.capacity(is_v));
  return gaac_fp8_slot_bytes(gaac_fp8_kind_of(element_), tile_dim, cal_.capacity(is_v));
}

void GaacKVCodec::calibrate_add(int32_t layer, const uint16_t* k, const uint16_t* v, int64_t n_tokens) {
  const size_t nk = (size_t)n_tokens * info_.n_head_kv * info_.head_dim_k;
  const size_t nv = (size_t)n_tokens * info_.n_head_kv * info_.head_dim_v;
  cal_k_[layer].assign(k, k + nk);
  cal_v_[layer].assign(v, v + nv);
  cal_n_[layer] = n_tokens;
}

void GaacKVCodec::calibrate_finish(int32_t n_tokens) {
  GaacCalibration c;
  GaacStats sk, sv;
  if (element_ == GaacElement::BF16) {
    GaacCalibrator cal(info_);
    for (int32_t il = 0; il < info_.n_layer; ++il) {
      cal.add(il, false, cal_k_[il].data(), cal_n_[il]);
      cal.add(il, true, cal_v_[il].data(), cal_n_[il]);
    }
    c = cal.finish(n_tokens);
    for (int32_t il = 0; il < info_.n_layer; ++il) {
      gaac_measure(c, il, false, cal_k_[il].data(), cal_n_[il], sk);
      gaac_measure(c, il, true, cal_v_[il].data(), cal_n_[il], sv);
    }
  } else {
    GaacFp8Calibrator cal(info_, element_);
    for (int32_t il = 0; il < info_.n_layer; ++il) {  // pass 1: the scales
      cal.add_amax(il, false, cal_k_[il].data(), cal_n_[il]);
      cal.add_amax(il, true, cal_v_[il].data(), cal_n_[il]);
    }
    for (int32_t il = 0; il < info_.n_layer; ++il) {  // pass 2: exponent windows of the FP8 values
      cal.add(il, false, cal_k_[il].data(), cal_n_[il]);
      cal.add(il, true, cal_v_[il].data(), cal_n_[il]);
    }
    c = cal.finish(n_tokens);
    for (int32_t il = 0; il < info_.n_layer; ++il) {
      gaac_fp8_measure(c, il, false, cal_k_[il].data(), cal_n_[il], sk);
      gaac_fp8_measure(c, il, true, cal_v_[il].data(), cal_n_[il], sv);
    }
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
  cal_k_.clear();
  cal_v_.clear();
  log(LogLevel::Info, "%s: calibrated online on %d tokens (capacity K %u, V %u bytes)", name(), n_tokens,
      c.capacity(false), c.capacity(true));
}

// Uploads the bases as one block [layer][K|V][mode][n_head_kv * head_dim] (and, for FP8, the
// scales [layer][K|V][n_head_kv]) and points each layer's state at its part.
void GaacKVCodec::install(const GaacCalibration& c) {
  cal_ = c;
  const int32_t L = info_.n_layer, H = info_.n_head_kv;
  const size_t per[2] = {(size_t)H * info_.head_dim_k, (size_t)H * info_.head_dim_v};
  const size_t layer_bytes = 2 * (per[0] + per[1]);
  std::vector<uint8_t> host((size_t)L * layer_bytes);
  std::vector<float> scales((size_t)L * 2 * H, 1.f);
  std::vector<GaacKVLayer> layers(L);
  if (!dev_bases_) dev_bases_ = static_cast<uint8_t*>(be_.alloc(host.size()));
  const bool fp8 = element_ != GaacElement::BF16;
  if (fp8 && !dev_scales_) dev_scales_ = static_cast<float*>(be_.alloc(scales.size() * sizeof(float)));
  for (int32_t il = 0; il < L; ++il) {
    size_t off = (size_t)il * layer_bytes;
    GaacKVLayer& st = layers[il];
    st.element = (int32_t)element_;
    st.quantize = fp8 ? 1 : 0;
    for (int is_v = 0; is_v < 2; ++is_v) {
      const int32_t d = info_.head_dim(is_v);
      for (int mode = 0; mode < 2; ++mode) {
        for (int32_t h = 0; h < H; ++h) std::memcpy(host.data() + off + (size_t)h * d, c.bases(mode, il, is_v, h), d);
        st.bases[is_v][mode] = dev_bases_ + off;
        off += per[is_v];
      }
      st.capacity[is_v] = c.capacity(is_v);
      if (fp8) {
        for (int32_t h = 0; h < H; ++h) scales[((size_t)il * 2 + is_v) * H + h] = c.scale(il, is_v, h);
        st.scales[is_v] = dev_scales_ + ((size_t)il * 2 + is_v) * H;
      } else {
        st.scales[is_v] = nullptr;
      }
    }
  }
  be_.upload(dev_bases_, host.data(), host.size());
  if (fp8) be_.upload(dev_scales_, scales.data(), scales.size() * sizeof(float));
  be_.upload(dev_layers_, layers.data(), layers.size() * sizeof(GaacKVLayer));
  calibrated_ = true;
}

// FP8: a BF16 value rounded through FP8 with the head's power-of-two scale (exact in BF16).
void GaacKVCodec::transform_raw_page(int32_t layer, int32_t head, bool is_v, uint16_t* page, int32_t n_values) const {
  const int32_t kind = gaac_fp8_kind_of(element_);
  const float s = cal_.scale(layer, is_v, head);
  for (int32_t i = 0; i < n_values; ++i)
    page[i] = f32_to_bf16(gaac_fp8_to_f32(kind, gaac_fp8_from_f32(kind, bf16_to_f32(page[i]) / s)) * s);
}

void GaacKVCodec::account(const KVFinalizeJob& job, const uint8_t* slot, CodecStats& into) const {
  const int32_t d = info_.tile_dim(job.is_v);
  if (!job.fits) {
    ++into.tiles_raw;
    return;
  }
  ++into.tiles_encoded;
  into.bf16_bytes += gaac_raw_tile_bytes(d);
  if (element_ == GaacElement::BF16) {
    into.element_bytes += gaac_raw_tile_bytes(d);
    into.used_bytes += gaac_fixed_bytes(d) + (uint32_t)job.escape_bytes;
  } else {
    const int32_t kind = gaac_fp8_kind_of(element_);
    into.element_bytes += gaac_fp8_raw_tile_bytes(d);
    into.used_bytes += gaac_fp8_fixed_bytes(kind, d) + (uint32_t)job.escape_bytes;
  }
  if (slot) {
    const GaacModeCounts m = element_ == GaacElement::BF16 ? gaac_tile_modes(slot, d)
                                                           : gaac_fp8_tile_modes(gaac_fp8_kind_of(element_), slot, d);
    into.groups[0] += m.n3;
    into.groups[1] += m.n4;
    into.groups[2] += m.nraw;
  }
}

}  // namespace gaacrt
