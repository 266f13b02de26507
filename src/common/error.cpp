// error.cpp — strfmt().
#include "error.h"

#include <cstdarg>
#include <cstdio>

namespace gaacrt {

std::string strfmt(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(&out[0], out.size() + 1, fmt, ap2);
  va_end(ap2);
  return out;
}

}  // namespace gaacrt
