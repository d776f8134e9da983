// epyctune with the test hooks the end-to-end tests need, read from the
// environment once at startup. Built with the tests and never installed: the
// shipped binary runs the same CLI code without this file, so no environment
// variable can crash it or fake the system's state (test_shipped_binaries.cpp
// checks).
//
//   EPYCTUNE_TEST_CRASH_AFTER_WRITES=k  _exit(86) right after the k-th host
//                                       write, as a kill -9 would leave it
//   EPYCTUNE_TEST_SYSTEM_STATE=STATE    systemd's SystemState ("stopping"),
//                                       with no queued jobs, instead of PID 1's
//   EPYCTUNE_TEST_UNPRIVILEGED=1        run as a user without root or any
//                                       capability would, on a --sysroot tree
//                                       too: the privilege check runs, and a
//                                       file others may not read (0600 MSRs)
//                                       reads as EACCES (stack/privileges.hpp)
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "apps/epyctune/cli_main.hpp"
#include "host/shutdown.hpp"
#include "stack/privileges.hpp"
#include "write_crash.hpp"

namespace {

void install_hooks() {
  if (const char* v = std::getenv("EPYCTUNE_TEST_CRASH_AFTER_WRITES")) {
    char* end = nullptr;
    unsigned long long k = std::strtoull(v, &end, 10);
    if (end != v && *end == '\0') epyctune::testing::crash_after_writes(k);
  }
  const char* state = std::getenv("EPYCTUNE_TEST_SYSTEM_STATE");
  if (state != nullptr && *state != '\0') {
    epyctune::host::set_manager_state_source([s = std::string(state)] {
      return std::optional<epyctune::host::ManagerState>{{s, {}}};
    });
  }
  const char* unprivileged = std::getenv("EPYCTUNE_TEST_UNPRIVILEGED");
  if (unprivileged != nullptr && std::string(unprivileged) == "1")
    epyctune::stack::set_privileges_source([] { return epyctune::stack::ProcessPrivileges{}; });
}

}  // namespace

int main(int argc, char** argv) {
  install_hooks();
  return epyctune::cli::run_main(argc, argv);
}
