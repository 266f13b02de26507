// fp8_codec.h — host side of GAAC on FP8 KV (shared/spec/gaac.md "FP8 variants"): quantizing BF16
// KV to FP8 with per-(layer, K|V, kv-head) scales, calibrating the {2-bit, 3-bit, raw} windows,
// and measuring real KV through the FP8 tile encoder (the format is gaac_fp8_format.h).
//
//   GaacFp8Calibrator cal(info, GaacElement::FP8_E4M3);
//   cal.add_amax(layer, is_v, kv, n) for all layers   // scales: headroom x largest |x| / fp8 max
//   cal.add(layer, is_v, kv, n)      for all layers   // exponent histograms of the FP8 values
//   GaacCalibration c = cal.finish(ctx_len);          // scales + bases b2 (mode 0), b3 (mode 1)
//   gaac_fp8_measure(c, layer, is_v, kv, n, stats);   // ratio vs FP8 bytes; stats.set_capacities...
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "calibration.h"

namespace gaacrt {

// GAAC_FP8_E4M3 / GAAC_FP8_E5M2 of an FP8 element; Error("gaac", "bad_argument") for BF16.
int32_t gaac_fp8_kind_of(GaacElement el);

// out[i] = FP8 bits of bf16[i] / scale (round to nearest even, saturating).
void gaac_fp8_quantize(int32_t kind, const uint16_t* bf16, size_t n, float scale, uint8_t* out);

class GaacFp8Calibrator {
 public:
  GaacFp8Calibrator(const GaacModelInfo& m, GaacElement el);
  const GaacModelInfo& model() const { return model_; }
  // Pass 1: largest magnitude per (layer, K|V, kv-head) of BF16 KV [n_tokens][n_head_kv][head_dim].
  void add_amax(int32_t layer, bool is_v, const uint16_t* kv, int64_t n_tokens);
  // Pass 2: FP8 exponent histograms (the scales are frozen at the first call).
  void add(int32_t layer, bool is_v, const uint16_t* kv, int64_t n_tokens);
  GaacCalibration finish(int32_t ctx_len);

 private:
  void freeze_scales();
  GaacModelInfo model_;
  GaacElement element_;
  std::vector<float> amax_, scale_;          // [layer][K|V][kv-head]
  std::vector<uint64_t> hist_;               // [layer][K|V][kv-head][channel][256]
  uint64_t tokens_ = 0;
  bool frozen_ = false;
};

// Quantizes every complete 16-token tile of one layer's K or V with the calibration's scale, encodes
// it with the FP8 tile encoder, checks the decode returns the FP8 bits exactly
// (Error("gaac", "roundtrip") otherwise) and adds modes and escapes to `into` (ratios are then
// against FP8 bytes: fixed part and raw tile are the FP8 ones).
void gaac_fp8_measure(const GaacCalibration& c, int32_t layer, bool is_v, const uint16_t* kv, int64_t n_tokens,
                      GaacStats& into);

}  // namespace gaacrt
