// calibration.cpp — window and capacity choice, statistics, the calibrator and the measurement of
// real KV through the real encoder (shared/spec/gaac.md "Calibration", "Slots").
#include "calibration.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "gaac_format.h"

namespace gaacrt {

// ---- windows and capacity -----------------------------------------------------------------------
uint8_t gaac_best_window(const uint64_t* hist, int32_t width) {
  if (width < 1 || width > 256) throw Error("gaac", "bad_argument", strfmt("window width %d is not in 1..256", width));
  uint64_t cover = 0;
  for (int32_t e = 0; e < width; ++e) cover += hist[e];
  uint64_t best = cover;
  int32_t best_b = 0;
  // Slide the window one exponent at a time; strictly greater keeps the lowest base on ties.
  for (int32_t b = 1; b + width <= 256; ++b) {
    cover += hist[b + width - 1];
    cover -= hist[b - 1];
    if (cover > best) { best = cover; best_b = b; }
  }
  return static_cast<uint8_t>(best_b);
}

double gaac_expected_tile_bytes(const std::vector<uint64_t>& hist, uint32_t capacity, uint32_t fixed,
                                uint32_t raw_bytes) {
  uint64_t total = 0, fit = 0;
  for (size_t n = 0; n < hist.size(); ++n) {
    total += hist[n];
    if (n <= capacity) fit += hist[n];
  }
  if (total == 0) return 0.0;
  const double p = static_cast<double>(fit) / static_cast<double>(total);
  return p * (static_cast<double>(fixed) + capacity) + (1.0 - p) * raw_bytes;
}

uint32_t gaac_choose_capacity(const std::vector<uint64_t>& hist, uint32_t fixed, uint32_t raw_bytes, uint32_t align) {
  if (align == 0) throw Error("gaac", "bad_argument", "capacity alignment must be at least 1");
  uint64_t total = 0;
  for (uint64_t h : hist) total += h;
  if (total == 0) return 0;
  // Past the largest escape count seen every tile fits and E only grows, so stop there.
  const uint32_t top = static_cast<uint32_t>(hist.size());
  uint32_t best_c = 0;
  double best = gaac_expected_tile_bytes(hist, 0, fixed, raw_bytes);
  for (uint32_t c = align; c < top + align; c += align) {
    const double e = gaac_expected_tile_bytes(hist, c, fixed, raw_bytes);
    if (e < best) { best = e; best_c = c; }
  }
  return best_c;
}

// ---- statistics -----------------------------------------------------------------------------
void GaacStats::add_tile(int32_t td, uint32_t fixed, uint32_t raw_bytes, uint32_t n_narrow, uint32_t n_wide,
                         uint32_t n_raw, uint32_t escape) {
  if (tiles == 0 && tile_dim == 0) {
    tile_dim = td;
    fixed_bytes = fixed;
    raw_tile_bytes = raw_bytes;
  } else if (td != tile_dim || fixed != fixed_bytes) {
    throw Error("gaac", "bad_argument", strfmt("stats: a tile of dim %d added to stats of tile dim %d", td, tile_dim));
  }
  ++tiles;
  groups[0] += n_narrow;
  groups[1] += n_wide;
  groups[2] += n_raw;
  escape_bytes += escape;
  if (escape_hist.size() <= escape) escape_hist.resize(escape + 1, 0);
  ++escape_hist[escape];
}

void GaacStats::merge(const GaacStats& o) {
  if (o.tiles == 0) return;
  if (tiles != 0 && (o.tile_dim != tile_dim || o.fixed_bytes != fixed_bytes))
    throw Error("gaac", "bad_argument", strfmt("stats: merging tile dim %d into tile dim %d", o.tile_dim, tile_dim));
  tile_dim = o.tile_dim;
  fixed_bytes = o.fixed_bytes;
  raw_tile_bytes = o.raw_tile_bytes;
  tiles += o.tiles;
  for (int k = 0; k < 3; ++k) groups[k] += o.groups[k];
  escape_bytes += o.escape_bytes;
  for (int k = 0; k < 256; ++k) exp_hist[k] += o.exp_hist[k];
  if (escape_hist.size() < o.escape_hist.size()) escape_hist.resize(o.escape_hist.size(), 0);
  for (size_t k = 0; k < o.escape_hist.size(); ++k) escape_hist[k] += o.escape_hist[k];
}

uint64_t GaacStats::elements() const { return tiles * GAAC_TILE_TOKENS * static_cast<uint64_t>(tile_dim); }

double GaacStats::group_share(int mode) const {
  const uint64_t n = groups[0] + groups[1] + groups[2];
  return n ? static_cast<double>(groups[mode]) / static_cast<double>(n) : 0.0;
}

double GaacStats::exponent_entropy() const {
  uint64_t n = 0;
  for (uint64_t h : exp_hist) n += h;
  double bits = 0.0;
  for (uint64_t h : exp_hist)
    if (h) {
      const double p = static_cast<double>(h) / static_cast<double>(n);
      bits -= p * std::log2(p);
    }
  return bits;
}

double GaacStats::codec_ratio() const {
  const double used = static_cast<double>(tiles) * fixed_bytes + static_cast<double>(escape_bytes);
  return used > 0 ? static_cast<double>(tiles) * raw_tile_bytes / used : 0.0;
}

uint64_t GaacStats::tiles_over(uint32_t capacity) const {
  uint64_t n = 0;
  for (size_t k = static_cast<size_t>(capacity) + 1; k < escape_hist.size(); ++k) n += escape_hist[k];
  return n;
}

double GaacStats::resident_ratio(uint32_t capacity) const {
  if (tiles == 0) return 0.0;
  const uint64_t over = tiles_over(capacity);
  const double resident = static_cast<double>(tiles - over) * (fixed_bytes + capacity) +
                          static_cast<double>(over) * raw_tile_bytes + static_cast<double>(tiles) * kEntryBytes;
  return static_cast<double>(tiles) * raw_tile_bytes / resident;
}

// ---- the calibration object -----------------------------------------------------------------------
const char* gaac_element_name(GaacElement e) {
  switch (e) {
    case GaacElement::BF16: return "bf16";
    case GaacElement::FP8_E4M3: return "fp8_e4m3";
    case GaacElement::FP8_E5M2: return "fp8_e5m2";
  }
  return "?";
}

GaacCalibration::GaacCalibration(const GaacModelInfo& m, GaacElement el, int32_t w_narrow, int32_t w_wide)
    : model_(m), element_(el), w_narrow_(w_narrow), w_wide_(w_wide) {
  if (m.n_layer <= 0 || m.n_head_kv <= 0 || m.head_dim_k <= 0 || m.head_dim_v <= 0)
    throw Error("gaac", "bad_dims", strfmt("calibration: dims n_layer %d, n_head_kv %d, head dims %d/%d must be positive",
                                           m.n_layer, m.n_head_kv, m.head_dim_k, m.head_dim_v));
  if (w_narrow < 1 || w_wide <= w_narrow || w_wide > 8)
    throw Error("gaac", "bad_argument", strfmt("calibration: mode widths %d/%d", w_narrow, w_wide));
  const size_t n = static_cast<size_t>(m.n_layer) * m.n_head_kv * (m.head_dim_k + m.head_dim_v);
  bases_[0].assign(n, 0);
  bases_[1].assign(n, 0);
  if (el != GaacElement::BF16) scales_.assign(static_cast<size_t>(m.n_layer) * 2 * m.n_head_kv, 1.0f);
}

size_t GaacCalibration::base_index(int32_t layer, bool is_v, int32_t head) const {
  const GaacModelInfo& m = model_;
  if (layer < 0 || layer >= m.n_layer || head < 0 || head >= m.n_head_kv)
    throw Error("gaac", "bad_argument", strfmt("calibration: layer %d head %d outside %d layers x %d kv-heads",
                                               layer, head, m.n_layer, m.n_head_kv));
  return static_cast<size_t>(layer) * m.n_head_kv * (m.head_dim_k + m.head_dim_v) +
         (is_v ? static_cast<size_t>(m.n_head_kv) * m.head_dim_k : 0) + static_cast<size_t>(head) * m.head_dim(is_v);
}

uint8_t* GaacCalibration::bases(int mode, int32_t layer, bool is_v, int32_t head) {
  return bases_[mode != 0].data() + base_index(layer, is_v, head);
}
const uint8_t* GaacCalibration::bases(int mode, int32_t layer, bool is_v, int32_t head) const {
  return bases_[mode != 0].data() + base_index(layer, is_v, head);
}

float& GaacCalibration::scale(int32_t layer, bool is_v, int32_t head) {
  if (scales_.empty()) throw Error("gaac", "bad_argument", "calibration: a BF16 calibration has no FP8 scales");
  base_index(layer, is_v, head);  // range check
  return scales_[(static_cast<size_t>(layer) * 2 + is_v) * model_.n_head_kv + head];
}
float GaacCalibration::scale(int32_t layer, bool is_v, int32_t head) const {
  return const_cast<GaacCalibration*>(this)->scale(layer, is_v, head);
}

void GaacCalibration::set_capacities(uint32_t k, uint32_t v, uint32_t shared) {
  capacity_[0] = k;
  capacity_[1] = v;
  capacity_shared_ = shared;
}

void GaacCalibration::set_capacities(const GaacStats& k, const GaacStats& v) {
  GaacStats both = k;
  // A shared pool needs one slot size: only meaningful when K and V tiles have the same shape.
  if (k.tile_dim == v.tile_dim || k.tiles == 0 || v.tiles == 0) both.merge(v);
  set_capacities(k.best_capacity(), v.best_capacity(), both.best_capacity());
}

std::vector<uint8_t> GaacCalibration::packed_bases(int32_t layer) const {
  std::vector<uint8_t> out;
  for (int is_v = 0; is_v < 2; ++is_v) {
    const int32_t hd = model_.head_dim(is_v), td = model_.tile_dim(is_v);
    for (int32_t h = 0; h < model_.n_head_kv; ++h) {
      const uint8_t* b0 = bases(0, layer, is_v, h);
      const uint8_t* b1 = bases(1, layer, is_v, h);
      for (int32_t half = 0; half < hd / td; ++half)
        for (int32_t g = 0; g < td / 8; ++g) {
          const int32_t c = half * td + 8 * g;
          out.insert(out.end(), b0 + c, b0 + c + 8);
          out.insert(out.end(), b1 + c, b1 + c + 8);
        }
    }
  }
  return out;
}

// ---- calibrator -------------------------------------------------------------------------------
GaacCalibrator::GaacCalibrator(const GaacModelInfo& m) : model_(m) {
  GaacCalibration check(m, GaacElement::BF16, 3, 4);  // validates the dims
  hist_.assign(static_cast<size_t>(m.n_layer) * m.n_head_kv * (m.head_dim_k + m.head_dim_v) * 256, 0);
}

size_t GaacCalibrator::channel_index(int32_t layer, bool is_v, int32_t head, int32_t channel) const {
  const GaacModelInfo& m = model_;
  if (layer < 0 || layer >= m.n_layer || head < 0 || head >= m.n_head_kv || channel < 0 || channel >= m.head_dim(is_v))
    throw Error("gaac", "bad_argument", strfmt("calibrator: layer %d head %d channel %d out of range", layer, head, channel));
  return static_cast<size_t>(layer) * m.n_head_kv * (m.head_dim_k + m.head_dim_v) +
         (is_v ? static_cast<size_t>(m.n_head_kv) * m.head_dim_k : 0) + static_cast<size_t>(head) * m.head_dim(is_v) +
         channel;
}

void GaacCalibrator::add(int32_t layer, bool is_v, const uint16_t* kv, int64_t n_tokens) {
  const int32_t hd = model_.head_dim(is_v), nh = model_.n_head_kv;
  uint64_t* base = hist_.data() + channel_index(layer, is_v, 0, 0) * 256;  // heads and channels are contiguous
  const uint16_t* row = kv;
  for (int64_t t = 0; t < n_tokens; ++t, row += static_cast<size_t>(nh) * hd)
    for (int32_t c = 0; c < nh * hd; ++c) ++base[static_cast<size_t>(c) * 256 + ((row[c] >> 7) & 0xFF)];
  if (layer == 0) tokens_[is_v] += static_cast<uint64_t>(n_tokens);
}

const uint64_t* GaacCalibrator::histogram(int32_t layer, bool is_v, int32_t head, int32_t channel) const {
  return hist_.data() + channel_index(layer, is_v, head, channel) * 256;
}

GaacCalibration GaacCalibrator::finish(int32_t ctx_len) const {
  GaacCalibration c(model_, GaacElement::BF16, 3, 4);
  c.ctx_len = ctx_len;
  c.n_tokens = tokens_[0];
  for (int32_t l = 0; l < model_.n_layer; ++l)
    for (int is_v = 0; is_v < 2; ++is_v)
      for (int32_t h = 0; h < model_.n_head_kv; ++h) {
        uint8_t* b3 = c.bases(0, l, is_v, h);
        uint8_t* b4 = c.bases(1, l, is_v, h);
        for (int32_t ch = 0; ch < model_.head_dim(is_v); ++ch) {
          const uint64_t* hist = histogram(l, is_v, h, ch);
          b3[ch] = gaac_best_window(hist, 8);
          b4[ch] = gaac_best_window(hist, 16);
        }
      }
  return c;
}

// ---- measurement --------------------------------------------------------------------------------
void gaac_measure(const GaacCalibration& c, int32_t layer, bool is_v, const uint16_t* kv, int64_t n_tokens,
                  GaacStats& into) {
  if (c.element() != GaacElement::BF16)
    throw Error("gaac", "bad_argument", "gaac_measure: an FP8 calibration (use gaac_fp8_measure)");
  const GaacModelInfo& m = c.model();
  const int32_t hd = m.head_dim(is_v), td = m.tile_dim(is_v), nh = m.n_head_kv;
  const int32_t stride = nh * hd;
  const uint32_t cap = gaac_max_escape_bytes(td);
  std::vector<uint8_t> slot(gaac_slot_bytes(td, cap));
  std::vector<uint16_t> back(static_cast<size_t>(GAAC_TILE_TOKENS) * td);
  for (int64_t b = 0; b + GAAC_TILE_TOKENS <= n_tokens; b += GAAC_TILE_TOKENS)
    for (int32_t h = 0; h < nh; ++h)
      for (int32_t half = 0; half < hd / td; ++half) {
        const uint16_t* src = kv + b * stride + static_cast<int64_t>(h) * hd + half * td;
        const uint8_t* b3 = c.bases(0, layer, is_v, h) + half * td;
        const uint8_t* b4 = c.bases(1, layer, is_v, h) + half * td;
        const int32_t esc = gaac_encode_tile(src, stride, td, b3, b4, cap, slot.data());
        const GaacCheck chk = gaac_decode_tile(slot.data(), td, cap, b3, b4, back.data(), td);
        bool same = esc >= 0 && chk.status == GAAC_OK;
        for (int32_t t = 0; same && t < GAAC_TILE_TOKENS; ++t)
          same = std::memcmp(back.data() + t * td, src + static_cast<int64_t>(t) * stride, 2 * static_cast<size_t>(td)) == 0;
        if (!same)
          throw Error("gaac", "roundtrip", strfmt("gaac_measure: layer %d %s head %d block %lld half %d did not decode "
                                                  "bit-exactly (encode %d, decode status %d)", layer, is_v ? "V" : "K",
                                                  h, static_cast<long long>(b / GAAC_TILE_TOKENS), half, esc, chk.status));
        const GaacModeCounts mc = gaac_tile_modes(slot.data(), td);
        into.add_tile(td, gaac_fixed_bytes(td), gaac_raw_tile_bytes(td), mc.n3, mc.n4, mc.nraw,
                      static_cast<uint32_t>(esc));
        for (int32_t t = 0; t < GAAC_TILE_TOKENS; ++t)
          for (int32_t ch = 0; ch < td; ++ch) ++into.exp_hist[(src[static_cast<int64_t>(t) * stride + ch] >> 7) & 0xFF];
      }
}

}  // namespace gaacrt
