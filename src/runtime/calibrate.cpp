// calibrate.cpp — gaac_calibrate().
#include "calibrate.h"

#include <algorithm>

#include "common/error.h"
#include "context.h"

namespace gaacrt {

GaacCalibrationReport gaac_calibrate(const Model& m, const std::vector<std::vector<int32_t>>& texts, int32_t ctx) {
  if (ctx < 16) throw Error("gaac", "bad_argument", strfmt("calibration context %d is shorter than one block", ctx));
  const ModelConfig& c = m.config();
  const GaacModelInfo info = gaac_model_info(m.file());
  GaacCalibrator cal(info);
  // Every window's KV, kept to measure the escapes once the bases are known.
  struct Window { std::vector<std::vector<uint16_t>> k, v; std::vector<int32_t> n; };
  std::vector<Window> windows;
  GaacCalibrationReport rep;
  ContextParams cp;
  cp.n_ctx = ctx;
  cp.cache = "bf16";
  for (const auto& toks : texts)
    for (size_t at = 0; at + 16 <= toks.size(); at += (size_t)ctx) {
      const int32_t n = (int32_t)std::min<size_t>((size_t)ctx, toks.size() - at);
      Context cx(m, cp);
      const int seq = cx.cache().new_sequence();
      std::vector<float> logits(c.n_vocab);
      cx.prefill(seq, toks.data() + at, n, logits.data(), {});
      Window w;
      w.k.resize(c.n_layer);
      w.v.resize(c.n_layer);
      w.n.resize(c.n_layer);
      for (int il = 0; il < c.n_layer; ++il) {
        w.n[il] = cx.cache().export_layer(seq, il, w.k[il], w.v[il]);
        cal.add(il, false, w.k[il].data(), w.n[il]);
        cal.add(il, true, w.v[il].data(), w.n[il]);
      }
      rep.tokens += n;
      windows.push_back(std::move(w));
      cx.cache().free_sequence(seq);
    }
  if (windows.empty()) throw Error("gaac", "bad_argument", "no calibration text of at least 16 tokens");
  rep.calibration = cal.finish(ctx);
  for (const Window& w : windows)
    for (int il = 0; il < c.n_layer; ++il) {
      gaac_measure(rep.calibration, il, false, w.k[il].data(), w.n[il], rep.k);
      gaac_measure(rep.calibration, il, true, w.v[il].data(), w.n[il], rep.v);
    }
  rep.calibration.set_capacities(rep.k, rep.v);
  rep.calibration.n_tokens = (uint64_t)rep.tokens;
  return rep;
}

}  // namespace gaacrt
