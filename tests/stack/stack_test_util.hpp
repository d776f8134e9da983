// Small helpers the stack suites share: writing host files into a hand-made
// tree, and one crash-after-the-k-th-write run followed by revert.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "host/sysroot.hpp"
#include "stack/apply.hpp"
#include "stack/host_writes.hpp"
#include "stack/revert.hpp"
#include "write_crash.hpp"

namespace epyctune::testing {

// Writes `content` to root/rel, creating the directories above it.
inline void put(const std::filesystem::path& root, const std::string& rel,
                const std::string& content) {
  std::filesystem::create_directories((root / rel).parent_path());
  std::ofstream(root / rel) << content;
}

// Applies `knobs` in a child that dies right after its k-th host write (as a
// crash or kill -9 would), checks it died there, then reverts in this process.
inline stack::RevertResult crash_after_write_then_revert(const host::Sysroot& sys,
                                                         const std::vector<stack::Knob>& knobs,
                                                         uint64_t k) {
  pid_t child = fork();
  if (child == 0) {
    crash_after_writes(k);
    stack::apply_knobs(sys, knobs, {});
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == kCrashExitCode);
  return stack::revert_journal(sys);
}

}  // namespace epyctune::testing
