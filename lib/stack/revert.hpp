// revert = replay the journal backwards, restoring each recorded original,
// then clear the journal (and the state directory if epyctune created it).
// Needs nothing but the journal: no profile, no topology.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "host/sysroot.hpp"
#include "stack/apply.hpp"

namespace epyctune::stack {

struct RevertResult {
  bool had_journal = false;
  bool changed = false;
  int exit_code = kExitOk;
  std::string error;
  std::vector<std::string> notes;
  std::vector<KnobOutcome> knobs;  // newest first, as replayed
};

RevertResult revert_journal(const host::Sysroot& sys);

nlohmann::json to_json(const RevertResult& r);

}  // namespace epyctune::stack
