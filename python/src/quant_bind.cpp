// quant_bind.cpp — the quantized-block kernels, exposed for tests and benchmarks.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "common/error.h"
#include "cpu/dequantize.h"
#include "quant/types.h"

namespace nb = nanobind;

namespace gaacrt::py {

GGMLType parse_type(nb::handle t) {
  if (nb::isinstance<nb::int_>(t)) {
    const uint32_t id = nb::cast<uint32_t>(t);
    if (!type_traits(id)) throw nb::value_error(("unknown ggml type id " + std::to_string(id)).c_str());
    return static_cast<GGMLType>(id);
  }
  const std::string name = nb::cast<std::string>(t);
  for (uint32_t id = 0; id < 64; ++id) {
    const TypeTraits* tr = type_traits(id);
    if (!tr) continue;
    std::string a = tr->name, b = name;
    for (auto& c : a) c = static_cast<char>(std::tolower(c));
    for (auto& c : b) c = static_cast<char>(std::tolower(c));
    if (a == b) return static_cast<GGMLType>(id);
  }
  throw nb::value_error(("unknown ggml type name '" + name + "'").c_str());
}

using Bytes = nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu>;

void bind_quant(nb::module_& m) {
  m.def("type_info", [](nb::handle t) {
        const GGMLType ty = parse_type(t);
        const TypeTraits* tr = type_traits(ty);
        nb::dict d;
        d["name"] = tr->name;
        d["id"] = static_cast<uint32_t>(ty);
        d["block_size"] = tr->block_size;
        d["type_size"] = tr->type_size;
        d["supported"] = tr->supported;
        return d;
      }, nb::arg("type"), "block geometry of a ggml type given by name ('q4_K') or id");

  m.def("dequantize", [](Bytes raw, nb::handle type, int64_t n) {
        const GGMLType ty = parse_type(type);
        const TypeTraits* tr = type_traits(ty);
        if (n < 0 || n % tr->block_size != 0)
          throw nb::value_error(strfmt("dequantize: n = %lld is not a multiple of the %s block size %u",
                                       (long long)n, tr->name, tr->block_size).c_str());
        const size_t need = static_cast<size_t>(n / tr->block_size) * tr->type_size;
        if (raw.size() < need)
          throw nb::value_error(strfmt("dequantize: %zu bytes given, %zu needed for %lld %s elements",
                                       raw.size(), need, (long long)n, tr->name).c_str());
        float* out = new float[static_cast<size_t>(n)];
        nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<float*>(p); });
        {
          nb::gil_scoped_release nogil;
          cpu::dequantize_row(ty, raw.data(), out, n);
        }
        size_t shape[1] = {static_cast<size_t>(n)};
        return nb::ndarray<nb::numpy, float, nb::ndim<1>>(out, 1, shape, owner);
      }, nb::arg("raw"), nb::arg("type"), nb::arg("n"),
      "dequantize n elements of raw GGUF block bytes (uint8, C-contiguous) to float32");
}

}  // namespace gaacrt::py
