// fp8_codec.cpp — FP8 scales, window calibration and measurement (shared/spec/gaac.md "FP8
// variants"; the mode set and the tile are gaac_fp8_format.h's).
#include "fp8_codec.h"

#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/half.h"
#include "gaac_fp8_format.h"

namespace gaacrt {

int32_t gaac_fp8_kind_of(GaacElement el) {
  if (el == GaacElement::FP8_E4M3) return GAAC_FP8_E4M3;
  if (el == GaacElement::FP8_E5M2) return GAAC_FP8_E5M2;
  throw Error("gaac", "bad_argument", strfmt("element %s is not an FP8 type", gaac_element_name(el)));
}

void gaac_fp8_quantize(int32_t kind, const uint16_t* bf16, size_t n, float scale, uint8_t* out) {
  // Division, not multiplication by 1/scale: the FP8 value is round(x / scale), one rounding.
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(gaac_fp8_from_f32(kind, bf16_to_f32(bf16[i]) / scale));
}

GaacFp8Calibrator::GaacFp8Calibrator(const GaacModelInfo& m, GaacElement el) : model_(m), element_(el) {
  gaac_fp8_kind_of(el);
  GaacCalibration check(m, el, GAAC_FP8_W0, GAAC_FP8_W1);  // validates the dims
  amax_.assign(static_cast<size_t>(m.n_layer) * 2 * m.n_head_kv, 0.f);
  hist_.assign(static_cast<size_t>(m.n_layer) * m.n_head_kv * (m.head_dim_k + m.head_dim_v) * 256, 0);
}

void GaacFp8Calibrator::add_amax(int32_t layer, bool is_v, const uint16_t* kv, int64_t n_tokens) {
  if (frozen_) throw Error("gaac", "bad_argument", "fp8 calibrator: add_amax after add (the scales are frozen)");
  if (layer < 0 || layer >= model_.n_layer) throw Error("gaac", "bad_argument", strfmt("fp8 calibrator: layer %d", layer));
  const int32_t hd = model_.head_dim(is_v), nh = model_.n_head_kv;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int32_t h = 0; h < nh; ++h) {
      float& a = amax_[(static_cast<size_t>(layer) * 2 + is_v) * nh + h];
      const uint16_t* row = kv + (t * nh + h) * hd;
      for (int32_t c = 0; c < hd; ++c) {
        const float v = std::fabs(bf16_to_f32(row[c]));
        if (v > a && std::isfinite(v)) a = v;
      }
    }
}

void GaacFp8Calibrator::freeze_scales() {
  if (frozen_) return;
  const float fmax = gaac_fp8_max(gaac_fp8_kind_of(element_));
  scale_.resize(amax_.size());
  // The scale is headroom * amax / fp8_max rounded UP to a power of two (headroom 2x..4x): then
  // fp8 * scale is exact in BF16, so the cache can keep a tile's FP8-rounded values in BF16 raw
  // pages in the model's own units (attention reads raw pages without rescaling) and re-derive the
  // exact FP8 bits at finalize.
  for (size_t i = 0; i < amax_.size(); ++i)
    scale_[i] = amax_[i] > 0 ? std::exp2(std::ceil(std::log2(GAAC_FP8_HEADROOM * amax_[i] / fmax))) : 1.0f;
  frozen_ = true;
}

void GaacFp8Calibrator::add(int32_t layer, bool is_v, const uint16_t* kv, int64_t n_tokens) {
  freeze_scales();
  if (layer < 0 || layer >= model_.n_layer) throw Error("gaac", "bad_argument", strfmt("fp8 calibrator: layer %d", layer));
  const int32_t kind = gaac_fp8_kind_of(element_), hd = model_.head_dim(is_v), nh = model_.n_head_kv;
  const uint32_t M = static_cast<uint32_t>(gaac_fp8_mbits(kind)), emask = (1u << gaac_fp8_ebits(kind)) - 1u;
  const size_t base = static_cast<size_t>(layer) * nh * (model_.head_dim_k + model_.head_dim_v) +
                      (is_v ? static_cast<size_t>(nh) * model_.head_dim_k : 0);
  std::vector<uint8_t> q(static_cast<size_t>(hd));
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int32_t h = 0; h < nh; ++h) {
      gaac_fp8_quantize(kind, kv + (t * nh + h) * hd, hd, scale_[(static_cast<size_t>(layer) * 2 + is_v) * nh + h], q.data());
      uint64_t* hist = hist_.data() + (base + static_cast<size_t>(h) * hd) * 256;
      for (int32_t c = 0; c < hd; ++c) ++hist[static_cast<size_t>(c) * 256 + ((q[c] >> M) & emask)];
    }
  if (layer == 0 && !is_v) tokens_ += static_cast<uint64_t>(n_tokens);
}

GaacCalibration GaacFp8Calibrator::finish(int32_t ctx_len) {
  freeze_scales();
  GaacCalibration c(model_, element_, GAAC_FP8_W0, GAAC_FP8_W1);
  c.ctx_len = ctx_len;
  c.n_tokens = tokens_;
  const uint64_t* hist = hist_.data();
  for (int32_t l = 0; l < model_.n_layer; ++l)
    for (int is_v = 0; is_v < 2; ++is_v)
      for (int32_t h = 0; h < model_.n_head_kv; ++h) {
        c.scale(l, is_v, h) = scale_[(static_cast<size_t>(l) * 2 + is_v) * model_.n_head_kv + h];
        uint8_t* b0 = c.bases(0, l, is_v, h);
        uint8_t* b1 = c.bases(1, l, is_v, h);
        // Histograms above the exponent field are empty, so the lowest best window never starts
        // past 2^E - width.
        for (int32_t ch = 0; ch < model_.head_dim(is_v); ++ch, hist += 256) {
          b0[ch] = gaac_best_window(hist, 1 << GAAC_FP8_W0);
          b1[ch] = gaac_best_window(hist, 1 << GAAC_FP8_W1);
        }
      }
  return c;
}

void gaac_fp8_measure(const GaacCalibration& c, int32_t layer, bool is_v, const uint16_t* kv, int64_t n_tokens,
                      GaacStats& into) {
  const int32_t kind = gaac_fp8_kind_of(c.element());
  const GaacModelInfo& m = c.model();
  const int32_t hd = m.head_dim(is_v), td = m.tile_dim(is_v), nh = m.n_head_kv, stride = nh * hd;
  const uint32_t cap = gaac_fp8_max_escape_bytes(kind, td), M = static_cast<uint32_t>(gaac_fp8_mbits(kind));
  std::vector<uint8_t> tile(static_cast<size_t>(GAAC_TILE_TOKENS) * td), back(tile.size());
  std::vector<uint8_t> slot(gaac_fp8_slot_bytes(kind, td, cap));
  for (int64_t b = 0; b + GAAC_TILE_TOKENS <= n_tokens; b += GAAC_TILE_TOKENS)
    for (int32_t h = 0; h < nh; ++h)
      for (int32_t half = 0; half < hd / td; ++half) {
        for (int32_t t = 0; t < GAAC_TILE_TOKENS; ++t)
          gaac_fp8_quantize(kind, kv + (b + t) * stride + static_cast<int64_t>(h) * hd + half * td, td,
                            c.scale(layer, is_v, h), tile.data() + t * td);
        const uint8_t* b2 = c.bases(0, layer, is_v, h) + half * td;
        const uint8_t* b3 = c.bases(1, layer, is_v, h) + half * td;
        const int32_t esc = gaac_fp8_encode_tile(kind, tile.data(), td, td, b2, b3, cap, slot.data());
        const GaacCheck chk = gaac_fp8_decode_rows(kind, slot.data(), td, cap, b2, b3, 0xFFFFu, back.data(), td);
        if (esc < 0 || chk.status != GAAC_OK || back != tile)
          throw Error("gaac", "roundtrip", strfmt("gaac_fp8_measure: layer %d %s head %d block %lld half %d did not "
                                                  "decode bit-exactly (encode %d, decode status %d)", layer,
                                                  is_v ? "V" : "K", h, static_cast<long long>(b / GAAC_TILE_TOKENS),
                                                  half, esc, chk.status));
        const GaacModeCounts mc = gaac_fp8_tile_modes(kind, slot.data(), td);
        into.add_tile(td, gaac_fp8_fixed_bytes(kind, td), gaac_fp8_raw_tile_bytes(td), mc.n3, mc.n4, mc.nraw,
                      static_cast<uint32_t>(esc));
        for (uint8_t q : tile) ++into.exp_hist[(q >> M) & ((1u << gaac_fp8_ebits(kind)) - 1u)];
      }
}

}  // namespace gaacrt
