// error.h — the one exception type of the core, and a printf-style string helper.
//
// Every error names its area, the operation and the offending value, e.g.
//   [gguf] model.gguf: tensor 'blk.3.attn_q.weight': data [9812, 10900) past end of file (size 9000)
// and carries a short machine-readable `kind` ("tensor_data_past_eof") that tests and the
// bindings use to tell error classes apart. The C API maps these to status codes.
#pragma once
#include <stdexcept>
#include <string>

namespace gaacrt {

std::string strfmt(const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

class Error : public std::runtime_error {
 public:
  Error(std::string area, std::string kind, const std::string& message)
      : std::runtime_error("[" + area + "] " + message), area_(std::move(area)), kind_(std::move(kind)) {}
  const std::string& area() const { return area_; }  // "gguf", "model", "kv", ...
  const std::string& kind() const { return kind_; }  // e.g. "bad_magic"
 private:
  std::string area_, kind_;
};

// A malformed or unsupported GGUF file. kind is one of the classes listed in gguf_reader.h.
class GGUFError : public Error {
 public:
  GGUFError(std::string kind, const std::string& message) : Error("gguf", std::move(kind), message) {}
};

}  // namespace gaacrt
