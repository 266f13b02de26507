// module.cpp — the extension module gaacrt._core.
#include "bindings.h"

NB_MODULE(_core, m) {
  m.doc() = "gaacrt native core: GGUF reader, quantized kernels, inference runtime";
  gaacrt::py::bind_errors(m);
  gaacrt::py::bind_system(m);
  gaacrt::py::bind_gguf(m);
  gaacrt::py::bind_quant(m);
  gaacrt::py::bind_tokenizer(m);
  gaacrt::py::bind_model(m);
  gaacrt::py::bind_backend(m);
  gaacrt::py::bind_backend_ops(m);
  gaacrt::py::bind_gaac(m);
  gaacrt::py::bind_e8(m);
}
