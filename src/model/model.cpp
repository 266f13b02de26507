// model.cpp — open, configure and place a model.
#include "model.h"

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace gaacrt {

namespace {
std::unique_ptr<Backend> pick_backend(const ModelParams& p) {
  if (p.act_bits != 8 && p.act_bits != 16)
    throw Error("model", "invalid_argument", strfmt("act_bits = %d; must be 8 or 16", p.act_bits));
  BackendParams bp;
  bp.device = p.device;
  bp.n_threads = p.n_threads;
  bp.act_bits = p.act_bits;
  if (p.backend == "auto") {
    for (const char* name : {"cuda", "metal"})
      if (device_unavailable_reason(name).empty()) return create_backend(name, bp);
    bp.device = 0;
    return create_backend("cpu", bp);
  }
  return create_backend(p.backend, bp);
}
}  // namespace

Model::Model(const std::string& path, const ModelParams& p) : file_(path), cfg_(load_config(file_)) {
  if (p.progress && !p.progress(0.05f)) throw Error("model", "aborted", "loading cancelled by the progress callback");
  be_ = pick_backend(p);
  w_ = std::make_unique<ModelWeights>(file_, cfg_, *be_, p.progress);
}

const tok::Tokenizer& Model::tokenizer() const {
  std::call_once(tok_once_, [&] { tok_ = std::make_unique<tok::Tokenizer>(file_); });
  return *tok_;
}

Model::~Model() {
  w_.reset();  // weights free their device memory through the backend, so go first
}

std::string Model::description() const {
  uint64_t n_params = 0;
  for (const GGUFTensorInfo& t : file_.tensors()) n_params += (uint64_t)t.n_elements();
  const char* size_unit = n_params >= 1000000000ull ? "B" : "M";
  const double size = n_params >= 1000000000ull ? n_params / 1e9 : n_params / 1e6;
  // The most common 2-D weight type names the file, as llama.cpp's ftype does.
  std::string ty = "?";
  if (!w_->layers.empty()) ty = type_name(w_->layers[0].w_gate.type);
  for (auto& c : ty) c = (char)toupper(c);
  return strfmt("%s %.0f%s %s", cfg_.arch.c_str(), size, size_unit, ty.c_str());
}

}  // namespace gaacrt
