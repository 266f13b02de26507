// calibrate.h — offline GAAC calibration: run the model over real text with a BF16 cache, record
// the keys (after RoPE) and values of every layer, fit the bases and the escape capacities, and
// stamp the model's identity (shared/spec/gaac.md "Calibration"). gaac-calibrate and
// gaacrt.calibrate() are its two faces.
#pragma once
#include <cstdint>
#include <vector>

#include "codec/gaac/calibration.h"
#include "model/model.h"

namespace gaacrt {

struct GaacCalibrationReport {
  GaacCalibration calibration;
  GaacStats k, v;               // the calibration text re-encoded with the result
  int64_t tokens = 0;
};

// Each token list is cut into windows of `ctx` tokens (calibrate at the deployment length: RoPE
// moves key exponents with position); a window shorter than 16 tokens is skipped.
GaacCalibrationReport gaac_calibrate(const Model& m, const std::vector<std::vector<int32_t>>& texts, int32_t ctx);

}  // namespace gaacrt
