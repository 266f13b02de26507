// log.cpp — one global sink guarded by a mutex (log calls are rare: load, warnings).
#include "log.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace gaacrt {
namespace {
std::mutex g_mu;
LogFn g_fn = nullptr;
void* g_user = nullptr;
}  // namespace

void set_log(LogFn fn, void* user) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_fn = fn;
  g_user = user;
}

void log(LogLevel level, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_fn) g_fn(static_cast<int>(level), buf, g_user);
  else if (level >= LogLevel::Warn) std::fprintf(stderr, "gaacrt: %s\n", buf);
}

}  // namespace gaacrt
