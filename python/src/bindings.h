// bindings.h — one bind_* function per area; module.cpp calls them in order.
// Bindings only convert types and carry docstrings; all logic lives in the C++ core.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_format.h"

namespace gaacrt::py {

// e8_center as Python passes it: False / True (= "global"), or "off", "global", "block".
inline E8Center e8_center_arg(nanobind::handle h) {
  if (nanobind::isinstance<nanobind::bool_>(h)) return nanobind::cast<bool>(h) ? E8Center::Global : E8Center::Off;
  if (nanobind::isinstance<nanobind::str>(h)) return parse_e8_center(nanobind::cast<std::string>(h));
  throw nanobind::type_error("e8_center: expected a bool or one of 'off', 'global', 'block'");
}

// A zero-filled numpy array of the given shape that owns its buffer (freed with the array);
// *data points at the buffer for the binding to fill.
template <typename T>
nanobind::ndarray<nanobind::numpy, T> owned(std::vector<size_t> shape, T** data) {
  size_t n = 1;
  for (size_t s : shape) n *= s;
  T* buf = new T[n > 0 ? n : 1]();
  *data = buf;
  nanobind::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nanobind::ndarray<nanobind::numpy, T>(buf, shape.size(), shape.data(), owner);
}

// A weight matrix given as raw GGUF rows (n_rows, row_bytes) of `ty`: its view, data unset.
// Raises ValueError when a row is not whole blocks (backend_bind.cpp).
using RawRows = nanobind::ndarray<const uint8_t, nanobind::ndim<2>, nanobind::c_contig, nanobind::device::cpu>;
WeightView raw_weight_view(const RawRows& raw, GGMLType ty);

// Backend memory that frees itself; filled from host data when given.
struct Buf {
  Backend& be;
  void* p;
  Buf(Backend& b, size_t n, const void* src = nullptr) : be(b), p(b.alloc(n ? n : 4)) {
    if (!src || !n) return;
    try {
      be.upload(p, src, n);
    } catch (...) {
      be.free(p);
      throw;
    }
  }
  ~Buf() { be.free(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  float* f() const { return static_cast<float*>(p); }
};

// Raw GGUF rows placed on a backend as a loaded model's weights are (Backend::place_weight: the
// backend may regroup them, so the ops are tested on the layout a model runs on); the memory is
// freed with this object. A backend that would use host bytes in place (CPU, Metal) gets a copy
// in its own memory first: the numpy array is temporary, and Metal keeps a buffer for every host
// range it is handed.
struct PlacedWeight {
  Backend& be;
  WeightView w;
  std::unique_ptr<Buf> staged;  // the copy a shared-memory backend is handed
  void* owned = nullptr;        // what place_weight made
  PlacedWeight(Backend& b, const RawRows& raw, GGMLType ty) : be(b), w(raw_weight_view(raw, ty)) {
    w.data = raw.data();
    if (be.shares_host_memory()) {
      staged = std::make_unique<Buf>(be, raw.size(), raw.data());
      w.data = staged->p;
    }
    w = be.place_weight(w, &owned);
  }
  ~PlacedWeight() { be.free(owned); }
  PlacedWeight(const PlacedWeight&) = delete;
  PlacedWeight& operator=(const PlacedWeight&) = delete;
};

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
