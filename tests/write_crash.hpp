// Crash injection for the tests of write-ahead: the process dies right after
// its k-th host write from now, as a crash or kill -9 would leave it, with
// nothing flushed or unwound. Shared by the in-process crash tests (a forked
// child) and the test-only build of the CLI (tests/cli_hooks), so that both
// crash at the same point of a write.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <string>

#include "stack/host_writes.hpp"

namespace epyctune::testing {

// The exit code of a crashed run: no exit code epyctune itself uses.
inline constexpr int kCrashExitCode = 86;

// Replaces the write hooks with one that _exit()s once k more host writes are
// counted; k = 0 installs nothing. `>=` rather than `==`: a write counted by
// another thread between ours and the hook must not let the crash slip by.
inline void crash_after_writes(uint64_t k) {
  if (k == 0) return;
  const uint64_t at = stack::write_count() + k;
  stack::set_write_hooks({{}, [at](const std::string&) {
                            if (stack::write_count() >= at) ::_exit(kCrashExitCode);
                          }});
}

}  // namespace epyctune::testing
