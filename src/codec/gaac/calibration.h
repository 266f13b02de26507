// calibration.h — GAAC calibration (host C++): exponent windows per channel, the escape capacity
// C of a slot, the model identity a calibration belongs to, its sidecar file, and the statistics
// the project reports (shared/spec/gaac.md "Calibration", "Slots", "Reference figures").
//
// Flow (gaac-calibrate, or a test):
//   GaacCalibrator cal(gaac_model_info(gguf));
//   for each layer: cal.add(layer, K, k_bf16, n_tokens); cal.add(layer, V, ...)   // histograms
//   GaacCalibration c = cal.finish(ctx_len);          // bases: best 8- and 16-wide windows
//   GaacStats sk, sv; gaac_measure(c, layer, K, k_bf16, n, sk) ... // escapes per tile, same data
//   c.set_capacities(sk, sv);                          // C minimizing expected resident bytes
//   c.save("model.gaac");  ...  GaacCalibration::load("model.gaac", gaac_model_info(gguf));
//
// KV data is given per layer as BF16 bits [n_tokens][n_head_kv][head_dim] (keys after RoPE).
// The same class carries FP8 calibrations (fp8_codec.h): per-head scales, and the two narrower
// mode widths with their bases.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gaacrt {

class GGUFFile;

// ---- model identity -------------------------------------------------------------------------
// What a calibration is for. identity = FNV-1a 64 over "gaac-identity-v1", the architecture,
// n_layer, n_head_kv, head_dim_k, head_dim_v (int32 LE) and, for every tensor in file order, its
// name, type id, n_dims and shape. So a different model, size or quantization of a model is
// refused, while a renamed or re-metadata'd copy of the same file is not. (A fine-tune with the
// same tensor table is not told apart; calibration only affects the ratio, never correctness.)
struct GaacModelInfo {
  std::string arch;
  int32_t n_layer = 0, n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;
  uint64_t identity = 0;

  int32_t head_dim(bool is_v) const { return is_v ? head_dim_v : head_dim_k; }
  int32_t tile_dim(bool is_v) const { return head_dim(is_v) < 128 ? head_dim(is_v) : 128; }
  int32_t n_half(bool is_v) const { return head_dim(is_v) / tile_dim(is_v); }
};
GaacModelInfo gaac_model_info(const GGUFFile& f);   // dims through load_config; throws like it

// The sidecar that sits beside a model: "dir/model.gguf" -> "dir/model.gaac".
std::string gaac_sidecar_path(const std::string& model_path);

// ---- the math of calibration ------------------------------------------------------------------
// Start b of the window [b, b + width - 1] (b <= 256 - width) holding the most counts of a
// 256-bin exponent histogram; ties go to the lowest b (an empty histogram gives 0). Windows
// reaching past 255 are never better than the one ending at 255, so nothing is lost by the bound.
uint8_t gaac_best_window(const uint64_t* hist256, int32_t width);

// Expected resident bytes of one tile with escape capacity C, over a distribution of escape bytes
// per tile (hist[n] = tiles needing n bytes):
//   E(C) = P(esc <= C) * (fixed + C) + P(esc > C) * raw_bytes.
double gaac_expected_tile_bytes(const std::vector<uint64_t>& hist, uint32_t capacity, uint32_t fixed,
                                uint32_t raw_bytes);
// The C minimizing E(C) among multiples of `align` (16 keeps slots 16-byte aligned); ties go to
// the smaller C. An empty histogram gives 0.
uint32_t gaac_choose_capacity(const std::vector<uint64_t>& hist, uint32_t fixed, uint32_t raw_bytes,
                              uint32_t align = 16);

// Capacity for a cache that calibrates itself online and has not measured escapes yet: tile_dim / 2
// bytes (measured optima: 32 for SmolLM2's D = 64 tiles, 48 (K) and 64 (V) for Gemma-3's D = 128).
inline uint32_t gaac_default_capacity(int32_t tile_dim) { return static_cast<uint32_t>(tile_dim) / 2u; }

// ---- statistics ---------------------------------------------------------------------------------
// Counts over encoded tiles of one tile_dim (K or V of one model). Block-table entries are 4 bytes
// per tile (DESIGN.md "KV cache").
struct GaacStats {
  static constexpr uint32_t kEntryBytes = 4;
  int32_t tile_dim = 0;
  uint32_t fixed_bytes = 0, raw_tile_bytes = 0;   // per tile, set by the first tile
  uint64_t tiles = 0;
  uint64_t groups[3] = {0, 0, 0};                  // narrow mode, wide mode, raw
  uint64_t escape_bytes = 0;
  uint64_t exp_hist[256] = {};                     // every exponent seen (for the entropy)
  std::vector<uint64_t> escape_hist;               // tiles by escape bytes needed

  void add_tile(int32_t tile_dim, uint32_t fixed, uint32_t raw_bytes, uint32_t n_narrow, uint32_t n_wide,
                uint32_t n_raw, uint32_t escape);
  void merge(const GaacStats& o);
  uint64_t elements() const;
  double group_share(int mode) const;              // fraction of groups in mode 0/1/2
  double exponent_entropy() const;                 // bits, over exp_hist
  // BF16 bytes / bytes actually used (fixed parts with tags, plus escapes).
  double codec_ratio() const;
  uint64_t tiles_over(uint32_t capacity) const;    // tiles that stay raw with capacity C
  // BF16 bytes / (slots of fixed + C for the tiles that fit + raw tiles + block-table entries).
  double resident_ratio(uint32_t capacity) const;
  uint32_t best_capacity() const { return gaac_choose_capacity(escape_hist, fixed_bytes, raw_tile_bytes); }
};

// ---- the calibration --------------------------------------------------------------------------
enum class GaacElement : int32_t { BF16 = 0, FP8_E4M3 = 1, FP8_E5M2 = 2 };
const char* gaac_element_name(GaacElement e);

class GaacCalibration {
 public:
  GaacCalibration() = default;
  GaacCalibration(const GaacModelInfo& m, GaacElement el, int32_t w_narrow, int32_t w_wide);

  const GaacModelInfo& model() const { return model_; }
  GaacElement element() const { return element_; }
  int32_t width(int mode) const { return mode == 0 ? w_narrow_ : w_wide_; }  // BF16: 3, 4
  int32_t ctx_len = 0;          // tokens per calibration prompt (RoPE drift: calibrate at deployment length)
  uint64_t n_tokens = 0;        // tokens seen in total

  // Bases of mode 0 (b3 for BF16) and mode 1 (b4) for one (layer, K|V, kv-head): head_dim bytes;
  // tile `half` of a 256-dim head starts at + 128 * half.
  uint8_t* bases(int mode, int32_t layer, bool is_v, int32_t head);
  const uint8_t* bases(int mode, int32_t layer, bool is_v, int32_t head) const;
  // FP8 only: the per-(layer, K|V, kv-head) scale (x = fp8 * scale).
  float& scale(int32_t layer, bool is_v, int32_t head);
  float scale(int32_t layer, bool is_v, int32_t head) const;
  bool has_scales() const { return !scales_.empty(); }

  // Escape capacity of K and V slots, and one capacity for a pool shared by both.
  uint32_t capacity(bool is_v) const { return capacity_[is_v]; }
  uint32_t capacity_shared() const { return capacity_shared_; }
  void set_capacities(uint32_t k, uint32_t v, uint32_t shared);
  void set_capacities(const GaacStats& k, const GaacStats& v);   // each minimizing E

  // Device layout of one layer's bases for a lane that owns 8 channels: [K|V][n_head_kv][n_half]
  // [G = tile_dim / 8][16 bytes: 8 mode-0 bases, 8 mode-1 bases] — one 16-byte load per lane.
  std::vector<uint8_t> packed_bases(int32_t layer) const;

  // Sidecar file (format in sidecar.cpp). load() checks magic, version, size and checksum;
  // load(path, model) also refuses a calibration made for another model.
  void save(const std::string& path) const;
  static GaacCalibration load(const std::string& path);
  static GaacCalibration load(const std::string& path, const GaacModelInfo& model);
  // Throws Error("gaac", "identity_mismatch") naming both models when `m` is not the model.
  void check_model(const GaacModelInfo& m, const std::string& where) const;

 private:
  friend struct GaacSidecarIO;
  size_t base_index(int32_t layer, bool is_v, int32_t head) const;
  GaacModelInfo model_;
  GaacElement element_ = GaacElement::BF16;
  int32_t w_narrow_ = 3, w_wide_ = 4;
  std::vector<uint8_t> bases_[2];
  std::vector<float> scales_;
  uint32_t capacity_[2] = {0, 0};
  uint32_t capacity_shared_ = 0;
};

// Accumulates per-channel exponent histograms of BF16 KV, then picks the windows.
class GaacCalibrator {
 public:
  explicit GaacCalibrator(const GaacModelInfo& m);
  const GaacModelInfo& model() const { return model_; }
  // One layer's K or V: BF16 bits [n_tokens][n_head_kv][head_dim].
  void add(int32_t layer, bool is_v, const uint16_t* kv, int64_t n_tokens);
  // Bases from the histograms (capacities 0 until set_capacities). ctx_len is recorded.
  GaacCalibration finish(int32_t ctx_len) const;
  const uint64_t* histogram(int32_t layer, bool is_v, int32_t head, int32_t channel) const;

 private:
  size_t channel_index(int32_t layer, bool is_v, int32_t head, int32_t channel) const;
  GaacModelInfo model_;
  std::vector<uint64_t> hist_;   // [channel index][256]
  uint64_t tokens_[2] = {0, 0};
};

// Encodes every complete 16-token tile of one layer's K or V (BF16 bits [n_tokens][n_head_kv]
// [head_dim]) with the calibration's bases into scratch slots large enough for any tile, checks
// that each decodes back bit for bit (Error("gaac", "roundtrip") otherwise) and adds its modes and
// escape bytes to `into`. Tokens past the last multiple of 16 are not counted (they would sit in
// the BF16 tail).
void gaac_measure(const GaacCalibration& c, int32_t layer, bool is_v, const uint16_t* kv, int64_t n_tokens,
                  GaacStats& into);

}  // namespace gaacrt
