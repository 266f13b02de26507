// test_main.cpp — runs every TEST_CASE linked into the program (optionally those whose name
// contains argv[1]); prints one line per case and exits 1 if any failed.
#include <cstdio>
#include <cstring>
#include <exception>

#include "test_harness.h"

int main(int argc, char** argv) {
  const char* filter = argc > 1 ? argv[1] : "";
  int run = 0, failed = 0;
  for (const auto& c : gaacrt::test::cases()) {
    if (std::strstr(c.name, filter) == nullptr) continue;
    ++run;
    try {
      c.fn();
      std::printf("[ ok ] %s\n", c.name);
    } catch (const gaacrt::test::Failure& f) {
      ++failed;
      std::printf("[FAIL] %s\n       %s\n", c.name, f.message.c_str());
    } catch (const std::exception& e) {
      ++failed;
      std::printf("[FAIL] %s\n       exception: %s\n", c.name, e.what());
    }
    std::fflush(stdout);
  }
  std::printf("%d test cases, %d failed\n", run, failed);
  return failed == 0 && run > 0 ? 0 : 1;
}
