// log.h — the library's log: a callback when the embedding application set one, else stderr
// (warnings and errors only). Levels match gaacrt_log_level in include/gaacrt.h.
#pragma once

namespace gaacrt {

enum class LogLevel : int { Debug = 0, Info = 1, Warn = 2, Error = 3 };
using LogFn = void (*)(int level, const char* message, void* user);

void set_log(LogFn fn, void* user);
void log(LogLevel level, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

}  // namespace gaacrt
