// epyctune with the test hooks the end-to-end tests need, read from the
// environment once at startup. Built with the tests and never installed: the
// shipped binary runs the same CLI code without this file, so no environment
// variable can crash it.
//
//   EPYCTUNE_TEST_CRASH_AFTER_WRITES=k  _exit(86) right after the k-th host
//                                       write, as a kill -9 would leave it
#include <cstdint>
#include <cstdlib>

#include "apps/epyctune/cli_main.hpp"
#include "write_crash.hpp"

namespace {

void install_hooks() {
  if (const char* v = std::getenv("EPYCTUNE_TEST_CRASH_AFTER_WRITES")) {
    char* end = nullptr;
    unsigned long long k = std::strtoull(v, &end, 10);
    if (end != v && *end == '\0') epyctune::testing::crash_after_writes(k);
  }
}

}  // namespace

int main(int argc, char** argv) {
  install_hooks();
  return epyctune::cli::run_main(argc, argv);
}
