// c_api_internal.h — helpers shared by the C API's implementation files.
#pragma once
#include <string>

#include "common/error.h"
#include "gaacrt.h"

namespace gaacrt::capi {

gaacrt_status status_of(const Error& e);
gaacrt_status fail(gaacrt_status s, const std::string& message);

// Runs `body` (returning gaacrt_status) and turns any exception into a status + last error.
template <typename F>
gaacrt_status guarded(F&& body) {
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
