// backend_bind.cpp — gaacrt._core.Backend: run single backend ops on numpy inputs, so every
// backend can be tested op by op against the CPU reference (inputs uploaded, outputs downloaded).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <memory>

#include "backend/backend.h"
#include "bindings.h"
#include "common/error.h"

namespace nb = nanobind;

namespace gaacrt::py {

GGMLType parse_type(nb::handle t);  // quant_bind.cpp

namespace {

using Bytes2D = nb::ndarray<const uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using F32_2D = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

nb::ndarray<nb::numpy, float, nb::ndim<2>> new_f32(size_t rows, size_t cols, float** data) {
  float* buf = new float[rows * cols];
  *data = buf;
  nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<float*>(p); });
  size_t shape[2] = {rows, cols};
  return nb::ndarray<nb::numpy, float, nb::ndim<2>>(buf, 2, shape, owner);
}

}  // namespace

WeightView raw_weight_view(const RawRows& raw, GGMLType ty) {
  const TypeTraits* tr = type_traits(ty);
  const size_t row_bytes = raw.shape(1);
  if (row_bytes % tr->type_size)
    throw nb::value_error(strfmt("row of %zu bytes is not a whole number of %s blocks (%u bytes)", row_bytes, tr->name,
                                 tr->type_size).c_str());
  WeightView w;
  w.type = ty;
  w.n_rows = (int64_t)raw.shape(0);
  w.n_cols = (int64_t)(row_bytes / tr->type_size) * tr->block_size;
  w.row_stride = row_bytes;
  return w;
}


void bind_backend(nb::module_& m) {
  nb::class_<Backend>(m, "Backend", "One backend (cpu, cuda, ...), for running single ops on numpy arrays.")
      .def_prop_ro("name", [](const Backend& b) { return b.device().backend; })
      .def_prop_ro("device_name", [](const Backend& b) { return b.device().name; })
      .def("dequantize", [](Backend& be, Bytes2D raw, nb::handle type) {
             PlacedWeight pw(be, raw, parse_type(type));
             const WeightView& w = pw.w;
             float* out;
             auto arr = new_f32((size_t)w.n_rows, (size_t)w.n_cols, &out);
             {
               nb::gil_scoped_release nogil;
               Buf yd(be, (size_t)w.n_rows * w.n_cols * 4);
               be.dequantize(w, static_cast<float*>(yd.p));
               be.download(out, yd.p, (size_t)w.n_rows * w.n_cols * 4);
             }
             return arr;
           }, nb::arg("raw"), nb::arg("type"), "raw (n_rows, row_bytes) uint8 -> (n_rows, n_cols) float32")
      .def("matmul", [](Backend& be, Bytes2D raw, nb::handle type, F32_2D x) {
             PlacedWeight pw(be, raw, parse_type(type));
             const WeightView& w = pw.w;
             if ((int64_t)x.shape(1) != w.n_cols)
               throw nb::value_error(strfmt("x has %zu columns, the weight rows have %lld elements", x.shape(1),
                                            (long long)w.n_cols).c_str());
             const size_t n_tok = x.shape(0);
             float* out;
             auto arr = new_f32(n_tok, (size_t)w.n_rows, &out);
             {
               nb::gil_scoped_release nogil;
               Buf xd(be, x.size() * 4), yd(be, n_tok * w.n_rows * 4);
               be.upload(xd.p, x.data(), x.size() * 4);
               be.matmul(w, static_cast<const float*>(xd.p), (int64_t)n_tok, static_cast<float*>(yd.p), nullptr);
               be.download(out, yd.p, n_tok * w.n_rows * 4);
             }
             return arr;
           }, nb::arg("raw"), nb::arg("type"), nb::arg("x"), "y(n_tok, n_rows) = x(n_tok, n_cols) · wᵀ");

  m.def("open_backend", [](const std::string& name, int device, int n_threads, int act_bits) {
        std::unique_ptr<Backend> b;
        {
          nb::gil_scoped_release nogil;
          BackendParams p;
          p.device = device;
          p.n_threads = n_threads;
          p.act_bits = act_bits;
          b = create_backend(name, p);
        }
        return nb::cast(b.release(), nb::rv_policy::take_ownership);
      }, nb::arg("name"), nb::arg("device") = 0, nb::arg("n_threads") = 0, nb::arg("act_bits") = 16,
      "create a backend by name ('cpu', 'cuda'); act_bits: the quantized matmuls' activation precision (16 or 8); "
      "raises GaacrtError(kind='unavailable') with the reason");
}

}  // namespace gaacrt::py
