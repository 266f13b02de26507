// c_api.cpp — the C API of include/gaacrt.h over the C++ engine.
//
// Every entry point catches C++ exceptions at the boundary, stores the message in a
// thread-local string and returns a status code; nothing throws across the C ABI.
#include "gaacrt.h"

#include <string>

#include "backend/devices.h"
#include "c_api_internal.h"
#include "common/error.h"

namespace gaacrt::capi {

thread_local std::string g_last_error;

gaacrt_status status_of(const Error& e) {
  const std::string& area = e.area();
  const std::string& kind = e.kind();
  if (area == "io") return GAACRT_ERR_IO;
  if (area == "gguf") return kind == "unknown_tensor_type" ? GAACRT_ERR_UNSUPPORTED : GAACRT_ERR_BAD_FILE;
  if (kind == "unsupported_type" || kind == "unknown_architecture" || kind == "unknown_tokenizer")
    return GAACRT_ERR_UNSUPPORTED;
  if (kind == "out_of_memory" || kind == "arena_full") return GAACRT_ERR_OUT_OF_MEMORY;
  if (kind == "context_full") return GAACRT_ERR_CONTEXT_FULL;
  if (kind == "aborted") return GAACRT_ERR_ABORTED;
  if (area == "backend") return GAACRT_ERR_BACKEND;
  if (kind == "invalid_argument") return GAACRT_ERR_INVALID_ARGUMENT;
  return GAACRT_ERR_INTERNAL;
}

gaacrt_status fail(gaacrt_status s, const std::string& message) {
  g_last_error = message;
  return s;
}

}  // namespace gaacrt::capi

using namespace gaacrt;

extern "C" {

const char* gaacrt_version(void) { return GAACRT_VERSION; }

const char* gaacrt_last_error(void) { return capi::g_last_error.c_str(); }

const char* gaacrt_backends(void) {
  static const std::string list = [] {
    std::string s;
    for (const std::string& b : compiled_backends()) s += (s.empty() ? "" : ",") + b;
    return s;
  }();
  return list.c_str();
}

}  // extern "C"
