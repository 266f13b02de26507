// quant_bind.cpp — the quantized-block kernels, exposed for tests and benchmarks.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <map>
#include <memory>
#include <mutex>

#include "bindings.h"
#include "common/error.h"
#include "cpu/cpu_features.h"
#include "cpu/dequantize.h"
#include "cpu/matvec.h"
#include "cpu/quantize_act.h"
#include "cpu/thread_pool.h"
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

// ---- matvec -------------------------------------------------------------------------------------
// One ThreadPool per thread count, made on first use and kept: spawning threads per call would
// cost more than a small matvec. A pool serves one call at a time (run() is not re-entrant), so
// concurrent Python threads asking for the same count take turns on its mutex.
struct CachedPool {
  std::mutex busy;
  cpu::ThreadPool pool;
  explicit CachedPool(int n) : pool(n) {}
};

CachedPool& cached_pool(int n_threads) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<CachedPool>> pools;
  std::lock_guard<std::mutex> lock(mu);
  auto& p = pools[n_threads];
  if (!p) p = std::make_unique<CachedPool>(n_threads);
  return *p;
}

cpu::Isa parse_isa(const std::string& name) {
  if (name == "auto") return cpu::best_isa();
  for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::AVX2, cpu::Isa::NEON}) {
    if (name != cpu::isa_name(isa)) continue;
    if (!cpu::isa_available(isa))
      throw nb::value_error(("isa '" + name + "' is not available on this CPU/build").c_str());
    return isa;
  }
  throw nb::value_error(("unknown isa '" + name + "' (expected 'auto', 'scalar', 'avx2' or 'neon')").c_str());
}

// Any dtype accepted at the boundary, so a wrong one is reported by name instead of being
// converted silently.
using AnyArray = nb::ndarray<nb::ro, nb::device::cpu>;

bool is_c_contiguous(const AnyArray& a) {
  int64_t expect = 1;
  for (size_t d = a.ndim(); d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != expect) return false;
    expect *= static_cast<int64_t>(a.shape(d));
  }
  return true;
}

nb::object matvec(AnyArray raw, nb::handle type, AnyArray x, int n_threads, const std::string& isa_name, int act_bits) {
  const GGMLType ty = parse_type(type);
  const TypeTraits* tr = type_traits(ty);
  if (!tr->supported)
    throw nb::value_error(strfmt("matvec: weight type %s is not supported", tr->name).c_str());
  if (raw.dtype() != nb::dtype<uint8_t>() || raw.ndim() != 2 || !is_c_contiguous(raw))
    throw nb::type_error("matvec: raw must be a C-contiguous uint8 array of shape (n_rows, row_bytes)");
  if (x.dtype() != nb::dtype<float>() || (x.ndim() != 1 && x.ndim() != 2) || !is_c_contiguous(x))
    throw nb::type_error("matvec: x must be a C-contiguous float32 array of shape (n_cols,) or (n_tok, n_cols)");
  const int64_t n_rows = static_cast<int64_t>(raw.shape(0));
  const size_t rb = raw.shape(1);
  if (rb == 0 || rb % tr->type_size != 0)
    throw nb::value_error(strfmt("matvec: row_bytes %zu is not a positive multiple of the %s block size (%u bytes)",
                                 rb, tr->name, tr->type_size).c_str());
  const int64_t n_cols = static_cast<int64_t>(rb / tr->type_size) * tr->block_size;
  const int64_t n_tok = x.ndim() == 2 ? static_cast<int64_t>(x.shape(0)) : 1;
  const int64_t x_cols = static_cast<int64_t>(x.shape(x.ndim() - 1));
  if (x_cols != n_cols)
    throw nb::value_error(strfmt("matvec: x has %lld columns, the %s rows of %zu bytes hold %lld elements",
                                 (long long)x_cols, tr->name, rb, (long long)n_cols).c_str());
  if (n_threads < 1) throw nb::value_error(strfmt("matvec: n_threads = %d, must be >= 1", n_threads).c_str());
  if (act_bits != 8 && act_bits != 16)
    throw nb::value_error(strfmt("matvec: act_bits = %d, must be 8 or 16", act_bits).c_str());
  const cpu::Isa isa = parse_isa(isa_name);

  const size_t n_out = static_cast<size_t>(n_tok * n_rows);
  float* out = new float[n_out > 0 ? n_out : 1];
  nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<float*>(p); });
  WeightView w;
  w.type = ty;
  w.n_rows = n_rows;
  w.n_cols = n_cols;
  w.row_stride = rb;
  w.data = raw.data();
  {
    nb::gil_scoped_release nogil;
    CachedPool& cp = cached_pool(n_threads);
    std::lock_guard<std::mutex> lock(cp.busy);
    cpu::matmul(w, static_cast<const float*>(x.data()), n_tok, out, cp.pool, isa, act_bits);
  }
  if (x.ndim() == 1) {
    size_t shape[1] = {static_cast<size_t>(n_rows)};
    return nb::cast(nb::ndarray<nb::numpy, float, nb::ndim<1>>(out, 1, shape, owner));
  }
  size_t shape[2] = {static_cast<size_t>(n_tok), static_cast<size_t>(n_rows)};
  return nb::cast(nb::ndarray<nb::numpy, float, nb::ndim<2>>(out, 2, shape, owner));
}

nb::object quantize_act(AnyArray x, nb::handle weight_type, const std::string& isa_name, int act_bits) {
  const GGMLType ty = parse_type(weight_type);
  const cpu::Isa isa = parse_isa(isa_name);
  if (act_bits != 8 && act_bits != 16)
    throw nb::value_error(strfmt("quantize_act: act_bits = %d, must be 8 or 16", act_bits).c_str());
  if (x.dtype() != nb::dtype<float>() || x.ndim() != 1 || !is_c_contiguous(x))
    throw nb::type_error("quantize_act: x must be a C-contiguous float32 array of shape (n,)");
  const TypeTraits* tr = type_traits(ty);
  const int64_t n = static_cast<int64_t>(x.shape(0));
  if (n % tr->block_size != 0)
    throw nb::value_error(strfmt("quantize_act: n = %lld is not a multiple of the %s block size %u",
                                 (long long)n, tr->name, tr->block_size).c_str());
  const size_t bytes = cpu::act_row_bytes(ty, n, act_bits);  // throws for a type without a kernel
  uint8_t* out = new uint8_t[bytes > 0 ? bytes : 1];
  nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
  cpu::quantize_act_row(ty, static_cast<const float*>(x.data()), out, n, isa, act_bits);
  size_t shape[1] = {bytes};
  return nb::cast(nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(out, 1, shape, owner));
}

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

  m.def("matvec", &matvec, nb::arg("raw"), nb::arg("type"), nb::arg("x"), nb::arg("n_threads") = 1,
        nb::arg("isa") = "auto", nb::arg("act_bits") = 8,
        "y = x · Wᵀ for W given as raw GGUF rows (uint8 (n_rows, row_bytes), C-contiguous) of `type`, "
        "x float32 (n_cols,) or (n_tok, n_cols); returns float32 (n_rows,) or (n_tok, n_rows). "
        "Activations are quantized to act_bits: 8 as llama.cpp does, 16 to Q16 (int16, a scale per 32); "
        "isa: 'auto', 'scalar', 'avx2', 'neon'. Runs without the GIL on a cached thread pool of n_threads.");

  m.def("quantize_act", &quantize_act, nb::arg("x"), nb::arg("weight_type"), nb::arg("isa") = "auto",
        nb::arg("act_bits") = 8,
        "the bytes matvec dots `weight_type` rows against: x float32 (n,) as Q8_0, Q8_1 or Q8_K blocks "
        "(llama.cpp's reference quantizers, bit for bit on every isa) at act_bits 8, as a Q16 row "
        "(float32 d[n/32], float32 s[n/32], int16 q[n]) at 16, or the float32 bytes for float weight types");
}

}  // namespace gaacrt::py
