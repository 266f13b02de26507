// gguf_bind.cpp — gaacrt.GGUFFile: metadata as Python values, the tensor table, and zero-copy
// numpy views of tensor bytes (the view keeps the file mapped while it lives).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "gguf/gguf_reader.h"

namespace nb = nanobind;

namespace gaacrt::py {
namespace {

// GGUF strings are bytes; almost always UTF-8. Undecodable bytes survive as surrogates
// ("surrogateescape") so that nothing is lost: s.encode("utf-8", "surrogateescape") gives them back.
nb::object to_str(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
  if (!o) throw nb::python_error();
  return nb::steal(o);
}

// The inverse, for names passed back in: str (surrogates included) or bytes -> the raw bytes.
std::string from_str(nb::handle o) {
  if (PyBytes_Check(o.ptr())) return std::string(PyBytes_AS_STRING(o.ptr()), PyBytes_GET_SIZE(o.ptr()));
  if (!PyUnicode_Check(o.ptr())) throw nb::type_error("a tensor name must be str or bytes");
  nb::object b = nb::steal(PyUnicode_AsEncodedString(o.ptr(), "utf-8", "surrogateescape"));
  if (!b.is_valid()) throw nb::python_error();
  return std::string(PyBytes_AS_STRING(b.ptr()), PyBytes_GET_SIZE(b.ptr()));
}

nb::object to_python(const GGUFValue& v) {
  switch (v.type) {
    case GGUFValueType::STRING: return to_str(v.str);
    case GGUFValueType::BOOL: return nb::bool_(v.u != 0);
    case GGUFValueType::FLOAT32: case GGUFValueType::FLOAT64: return nb::float_(v.f);
    case GGUFValueType::UINT64: return nb::steal(PyLong_FromUnsignedLongLong(v.u));
    case GGUFValueType::ARRAY: {
      nb::list out;
      if (v.elem == GGUFValueType::STRING) {
        for (auto s : v.strings) out.append(to_str(s));
      } else if (v.elem == GGUFValueType::ARRAY) {
        for (auto& item : v.items) out.append(to_python(item));
      } else {
        for (uint64_t k = 0; k < v.count; ++k) {
          switch (v.elem) {
            case GGUFValueType::FLOAT32: case GGUFValueType::FLOAT64: out.append(nb::float_(v.number_at(k))); break;
            case GGUFValueType::BOOL: out.append(nb::bool_(v.int_at(k) != 0)); break;
            case GGUFValueType::UINT64: {
              uint64_t u;
              std::memcpy(&u, v.raw + 8 * k, 8);
              out.append(nb::steal(PyLong_FromUnsignedLongLong(u)));
              break;
            }
            default: out.append(nb::int_(v.int_at(k)));
          }
        }
      }
      return out;
    }
    default: return nb::int_(v.i);
  }
}

}  // namespace

void bind_gguf(nb::module_& m) {
  nb::class_<GGUFTensorInfo>(m, "TensorInfo", "One entry of a GGUF tensor table.")
      .def_prop_ro("name", [](const GGUFTensorInfo& t) { return to_str(t.name); })
      .def_prop_ro("type", [](const GGUFTensorInfo& t) { return std::string(type_name(t.type)); },
                   "ggml type name, e.g. 'q4_K'")
      .def_prop_ro("type_id", [](const GGUFTensorInfo& t) { return static_cast<uint32_t>(t.type); })
      .def_prop_ro("shape", [](const GGUFTensorInfo& t) {
            nb::list s;
            for (uint32_t d = 0; d < t.n_dims; ++d) s.append(t.ne[d]);
            return nb::tuple(s);
          }, "dimensions in ggml ne order (ne[0] is contiguous; reverse of the PyTorch shape)")
      .def_ro("offset", &GGUFTensorInfo::offset, "byte offset from the start of the data section")
      .def_ro("nbytes", &GGUFTensorInfo::nbytes)
      .def_ro("split", &GGUFTensorInfo::split, "index of the split part that holds the tensor")
      .def_prop_ro("n_elements", &GGUFTensorInfo::n_elements)
      .def("__repr__", [](const GGUFTensorInfo& t) {
        std::string s = "TensorInfo('" + t.name + "', " + type_name(t.type) + ", (";
        for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
        return to_str(s + "), offset=" + std::to_string(t.offset) + ", nbytes=" + std::to_string(t.nbytes) + ")");
      });

  nb::class_<GGUFFile>(m, "GGUFFile",
                       "A memory-mapped, validated GGUF file (v2/v3; split models open as one).")
      .def(nb::init<const std::string&>(), nb::arg("path"), nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("path", &GGUFFile::path)
      .def_prop_ro("version", &GGUFFile::version)
      .def_prop_ro("alignment", &GGUFFile::alignment)
      .def_prop_ro("data_offset", &GGUFFile::data_offset)
      .def_prop_ro("file_size", &GGUFFile::file_size)
      .def_prop_ro("n_splits", &GGUFFile::n_splits)
      .def_prop_ro("architecture", [](const GGUFFile& f) {
            const GGUFValue* v = f.find("general.architecture");
            return v && v->type == GGUFValueType::STRING ? to_str(v->str) : nb::none();
          })
      .def_prop_ro("metadata", [](const GGUFFile& f) {
            nb::dict d;
            for (auto& kv : f.metadata()) d[to_str(kv.first)] = to_python(kv.second);
            return d;
          }, "all key/value pairs in file order, as Python values (arrays become lists)")
      .def("metadata_type", [](const GGUFFile& f, const std::string& key) -> nb::object {
            const GGUFValue* v = f.find(key);
            if (!v) return nb::none();
            std::string t = gguf_value_type_name(v->type);
            if (v->is_array()) t += std::string("[") + gguf_value_type_name(v->elem) + "]";
            return nb::str(t.c_str());
          }, nb::arg("key"), "the GGUF value type of a key, e.g. 'uint32' or 'array[string]'")
      .def_prop_ro("tensors", [](const GGUFFile& f) { return f.tensors(); }, nb::rv_policy::copy)
      .def("tensor_info", [](const GGUFFile& f, nb::handle name_obj) {
            const std::string name = from_str(name_obj);
            const GGUFTensorInfo* t = f.find_tensor(name);
            if (!t) throw nb::key_error(("no tensor named '" + name + "'").c_str());
            return *t;
          }, nb::arg("name"))
      .def("tensor_bytes", [](nb::handle self, nb::handle name_obj) {
            const GGUFFile& f = nb::cast<const GGUFFile&>(self);
            const std::string name = from_str(name_obj);
            const GGUFTensorInfo* t = f.find_tensor(name);
            if (!t) throw nb::key_error(("no tensor named '" + name + "'").c_str());
            size_t shape[1] = {static_cast<size_t>(t->nbytes)};
            // The array's owner is the GGUFFile object, so the mapping outlives the view.
            return nb::ndarray<nb::numpy, const uint8_t, nb::ndim<1>>(t->data, 1, shape, self);
          }, nb::arg("name"), "a read-only, zero-copy numpy uint8 view of the tensor's raw bytes");
}

}  // namespace gaacrt::py
