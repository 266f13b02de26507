// errors.cpp — C++ exceptions to Python.
//
// gaacrt::Error -> gaacrt.GaacrtError (a RuntimeError) and GGUFError -> gaacrt.GGUFError (a
// ValueError: the file's content is wrong); both carry `.kind` (e.g. "bad_magic") and `.area`.
#include <nanobind/nanobind.h>

#include <string_view>

#include "bindings.h"
#include "common/error.h"

namespace nb = nanobind;

namespace gaacrt::py {
namespace {

PyObject* g_gaacrt_error = nullptr;
PyObject* g_gguf_error = nullptr;

void raise_with_kind(PyObject* type, const Error& e) {
  // Messages quote names from the file, which may hold any bytes: decode leniently so that a
  // corrupt name can never turn the error into a UnicodeDecodeError.
  const std::string_view what = e.what();
  PyObject* msg = PyUnicode_DecodeUTF8(what.data(), static_cast<Py_ssize_t>(what.size()), "backslashreplace");
  if (!msg) return;
  PyObject* exc = PyObject_CallOneArg(type, msg);
  Py_DECREF(msg);
  if (!exc) return;
  PyObject* kind = PyUnicode_FromString(e.kind().c_str());
  PyObject* area = PyUnicode_FromString(e.area().c_str());
  PyObject_SetAttrString(exc, "kind", kind);
  PyObject_SetAttrString(exc, "area", area);
  Py_XDECREF(kind);
  Py_XDECREF(area);
  PyErr_SetObject(type, exc);
  Py_DECREF(exc);
}

}  // namespace

void bind_errors(nb::module_& m) {
  g_gaacrt_error = PyErr_NewExceptionWithDoc(
      "gaacrt._core.GaacrtError", "An error from the gaacrt core; `.kind` names the class of problem.",
      PyExc_RuntimeError, nullptr);
  PyObject* bases = PyTuple_Pack(2, g_gaacrt_error, PyExc_ValueError);
  g_gguf_error = PyErr_NewExceptionWithDoc(
      "gaacrt._core.GGUFError", "A malformed or unsupported GGUF file; `.kind` names the problem "
      "(bad_magic, truncated, tensor_overlap, ...).", bases, nullptr);
  Py_DECREF(bases);
  m.attr("GaacrtError") = nb::handle(g_gaacrt_error);
  m.attr("GGUFError") = nb::handle(g_gguf_error);

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const GGUFError& e) {
      raise_with_kind(g_gguf_error, e);
    } catch (const Error& e) {
      raise_with_kind(g_gaacrt_error, e);
    }
  });
}

}  // namespace gaacrt::py
