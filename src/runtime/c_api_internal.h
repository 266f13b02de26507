// c_api_internal.h — the structs behind the C API's opaque handles, and helpers shared by the
// C API's implementation files.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "gaacrt.h"
#include "model/model.h"
#include "runtime/session.h"
#include "sampling/sampler.h"

struct gaacrt_model {
  std::unique_ptr<gaacrt::Model> model;
  std::string desc;
};

struct gaacrt_session {
  gaacrt_model* model;
  std::unique_ptr<gaacrt::Session> session;
  gaacrt_abort_fn abort = nullptr;
  void* abort_user = nullptr;
  bool owned_by_batch = false;
};

struct gaacrt_batch {
  std::shared_ptr<gaacrt::Context> ctx;
  std::vector<std::unique_ptr<gaacrt_session>> sessions;
};

struct gaacrt_sampler {
  std::unique_ptr<gaacrt::Sampler> sampler;
};

namespace gaacrt::capi {

gaacrt_status status_of(const Error& e);
gaacrt_status fail(gaacrt_status s, const std::string& message);
// Copies s to buf (NUL-terminated when nul); *len gets s.size(); short buffer -> BUFFER_TOO_SMALL.
gaacrt_status copy_out(const std::string& s, char* buf, size_t cap, size_t* len, bool nul);

// Runs `body` (returning gaacrt_status) and turns any exception into a status + last error.
template <typename F>
gaacrt_status guarded(F&& body) {
  extern thread_local std::string g_last_error;
  g_last_error.clear();
  try {
    return body();
  } catch (const Error& e) {
    return fail(status_of(e), e.what());
  } catch (const std::bad_alloc&) {
    return fail(GAACRT_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(GAACRT_ERR_INTERNAL, e.what());
  }
}

}  // namespace gaacrt::capi
