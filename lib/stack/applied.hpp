// What is applied right now, as the journal records it: the profile, the steps
// and how many knobs each changed, and since when. Read-only; `epyctune status`
// and `verify` without --profile start here.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "host/sysroot.hpp"

namespace epyctune::stack {

struct AppliedState {
  bool applied = false;               // a journal with at least one knob exists
  std::string journal_path;           // the journal's path on this machine (under the sysroot)
  std::string profile;                // the profile of the newest journaled knob
  std::vector<std::string> profiles;  // every profile in the journal, oldest first
  // Steps in the order they were first journaled, each with its knob count.
  std::vector<std::pair<std::string, int>> steps;
  int knobs = 0;
  std::optional<std::time_t> since;  // the journal's last modification
  bool torn_tail = false;            // a crash left a half-written last line
};

// Throws JournalError when the journal cannot be parsed.
AppliedState read_applied_state(const host::Sysroot& sys);

}  // namespace epyctune::stack
