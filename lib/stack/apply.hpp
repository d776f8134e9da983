// apply = for each knob that differs: journal its original (write-ahead,
// fsync'd) -> write -> read back and compare. A failed write rolls back what
// this run changed, unless keep_going. Exit codes are in kExit*.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "host/sysroot.hpp"
#include "stack/knob.hpp"

namespace epyctune::stack {

// Process exit codes of `epyctune apply` / `revert` (documented in --help).
inline constexpr int kExitOk = 0;     // done (changed or not)
inline constexpr int kExitError = 1;  // bad input, profile/host mismatch, journal unreadable
inline constexpr int kExitFailed =
    2;  // a knob failed or read back wrong (rolled back unless --keep-going)
inline constexpr int kExitLocked = 3;     // another epyctune holds the lock
inline constexpr int kExitPrivilege = 4;  // missing root / capability, nothing written

struct KnobOutcome {
  std::string step, name, key, path;
  std::string
      status;  // applied | unchanged | skipped | failed | mismatch | rolled-back | would-apply
  std::string before, after, reason;
  bool reboot_required = false;
};

struct ApplyOptions {
  bool check = false;       // dry run: plan, say what would change, write nothing
  bool keep_going = false;  // on a failed write, go on with the other knobs
  std::string profile;      // recorded in the journal
};

struct ApplyResult {
  bool changed = false;
  bool reboot_required = false;
  bool rolled_back = false;
  int exit_code = kExitOk;
  std::string error;               // the failure that stopped the run
  std::vector<std::string> notes;  // stale lock recovered, rollback problems
  std::vector<KnobOutcome> knobs;
};

ApplyResult apply_knobs(const host::Sysroot& sys, const std::vector<Knob>& knobs,
                        const ApplyOptions& opts);

nlohmann::json to_json(const KnobOutcome& o);
nlohmann::json to_json(const ApplyResult& r);

}  // namespace epyctune::stack
