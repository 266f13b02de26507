// test_harness.h — a tiny self-registering test harness for the C++ unit-test program.
//
//   TEST_CASE(vec_dot_matches_scalar) { CHECK(a == b, strfmt("a = %d", a)); }
//
// Each .cpp in tests/cpp adds its cases by defining them; test_main.cpp runs them all (or the
// ones whose name contains argv[1]) and exits non-zero if any failed. The same sources are
// cross-compiled for aarch64 and run under qemu by tests/test_neon_qemu.py.
#pragma once
#include <string>
#include <vector>

#include "common/error.h"  // gaacrt::strfmt for messages

namespace gaacrt::test {

struct Case {
  const char* name;
  void (*fn)();
};
inline std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}
struct Register {
  Register(const char* name, void (*fn)()) { cases().push_back({name, fn}); }
};
// Thrown by CHECK; test_main catches it, reports and moves on to the next case.
struct Failure {
  std::string message;
};

}  // namespace gaacrt::test

#define TEST_CASE(name)                                                        \
  static void name();                                                          \
  static const ::gaacrt::test::Register name##_registered_(#name, &name);      \
  static void name()

// msg is only evaluated when cond is false.
#define CHECK(cond, msg)                                                                       \
  do {                                                                                         \
    if (!(cond))                                                                               \
      throw ::gaacrt::test::Failure{std::string(__FILE__) + ":" + std::to_string(__LINE__) +   \
                                    ": CHECK(" #cond ") failed: " + std::string(msg)};         \
  } while (0)
