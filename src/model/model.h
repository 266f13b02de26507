// model.h — a loaded model: the file, its config, its weights on a backend.
// Shared by threads read-only; sessions (runtime/session.h) hold all per-conversation state.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "config.h"
#include "gguf/gguf_reader.h"
#include "weights.h"

namespace gaacrt {

struct ModelParams {
  std::string backend = "auto";  // "auto" (CUDA when usable, else CPU), "cpu", "cuda"
  int device = 0;
  int n_threads = 0;             // CPU threads; 0 = all cores
  // CPU matmuls: activations quantized to 16 bits (Q16, logits within ~2% of exact math) or 8
  // (llama.cpp's formats, bit for bit its integers; up to ~50% off at some positions).
  int act_bits = 16;
  // Called with progress in [0, 1] while loading; returning false cancels (Error "aborted").
  std::function<bool(float)> progress;
};

namespace tok {
class Tokenizer;
}

class Model {
 public:
  Model(const std::string& path, const ModelParams& p = {});
  ~Model();

  const GGUFFile& file() const { return file_; }
  const ModelConfig& config() const { return cfg_; }
  Backend& backend() const { return *be_; }
  const ModelWeights& weights() const { return *w_; }
  const std::string& path() const { return file_.path(); }
  std::string description() const;  // "llama 135M Q4_1" in llama-bench's style
  // The GGUF's tokenizer, built on first use (thread-safe); throws when the file has none.
  const tok::Tokenizer& tokenizer() const;

 private:
  GGUFFile file_;
  ModelConfig cfg_;
  std::unique_ptr<Backend> be_;
  std::unique_ptr<ModelWeights> w_;
  mutable std::once_flag tok_once_;
  mutable std::unique_ptr<tok::Tokenizer> tok_;
};

}  // namespace gaacrt
