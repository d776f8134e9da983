// apply = for each knob that differs: journal its original (write-ahead,
// fsync'd) -> write -> read back and compare. A failed write rolls back what
// this run changed, unless keep_going. Exit codes are in kExit*.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/exit_codes.hpp"
#include "host/sysroot.hpp"
#include "stack/knob.hpp"

namespace epyctune::stack {

// Process exit codes: the one table every command uses (common/exit_codes.hpp).
using epyctune::kExitError;
using epyctune::kExitFailed;
using epyctune::kExitLocked;
using epyctune::kExitOk;
using epyctune::kExitPrivilege;

// What apply or revert did with one knob. JSON and text show to_string's
// words.
enum class KnobStatus {
  Applied,     // "applied": written and read back as desired
  Unchanged,   // "unchanged": already as desired (or, reverting, already the original)
  Skipped,     // "skipped": not written (unsupported, an operator's job, after a failure)
  Failed,      // "failed": the read, write or journal append failed
  Mismatch,    // "mismatch": written, but reads back otherwise
  RolledBack,  // "rolled-back": written, then restored when a later knob failed
  WouldApply,  // "would-apply": check mode, would be written
  Restored,    // "restored": revert put the original back
};

std::string to_string(KnobStatus s);
// nullopt for a word to_string never gives.
std::optional<KnobStatus> knob_status_from_string(std::string_view s);

struct KnobOutcome {
  std::string step, name, key, path;
  KnobStatus status = KnobStatus::Skipped;
  std::string before, after, reason;
  bool reboot_required = false;
};

// Where a run is: knob `index` (0-based) of `count`, in the order passed in.
struct ApplyProgress {
  size_t index = 0;
  size_t count = 0;
  const Knob* knob = nullptr;
};

struct ApplyOptions {
  bool check = false;       // dry run: plan, say what would change, write nothing
  bool keep_going = false;  // on a failed write, go on with the other knobs
  std::string profile;      // recorded in the journal
  // Called before each knob is handled, so a caller can show progress; the
  // library itself prints nothing.
  std::function<void(const ApplyProgress&)> on_progress = nullptr;
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
