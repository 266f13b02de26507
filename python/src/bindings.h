// bindings.h — one bind_* function per area; module.cpp calls them in order.
// Bindings only convert types and carry docstrings; all logic lives in the C++ core.
#pragma once
#include <nanobind/nanobind.h>

namespace gaacrt::py {

void bind_errors(nanobind::module_& m);
void bind_gguf(nanobind::module_& m);
void bind_quant(nanobind::module_& m);
void bind_system(nanobind::module_& m);
void bind_tokenizer(nanobind::module_& m);
void bind_model(nanobind::module_& m);
void bind_backend(nanobind::module_& m);
void bind_backend_ops(nanobind::module_& m);
void bind_gaac(nanobind::module_& m);
void bind_e8(nanobind::module_& m);

}  // namespace gaacrt::py
