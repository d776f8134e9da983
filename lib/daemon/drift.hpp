// Drift: the host moved away from the applied profile (an operator, another
// tuner, a hotplugged CPU, a kernel that reset a value). Detected by planning
// the session's knobs again (stack::plan_knobs, read-only); repaired, when
// the config says so, by applying only the knobs that differ through
// stack::apply_knobs, which journals them like every other write.
#pragma once

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "stack/apply.hpp"
#include "stack/checklist.hpp"
#include "stack/plan.hpp"
#include "stack/session.hpp"

namespace epyctune::daemon {

struct DriftedKnob {
  std::string step, name, path, current, desired;
};

// What made the daemon verify (or load its config).
enum class Trigger { start, reload, interval, uevent, request };
// "start", "reload", "interval", "uevent", "request": in logs and status JSON.
const char* trigger_name(Trigger t);

struct VerifyReport {
  std::time_t at = 0;
  Trigger trigger = Trigger::start;
  stack::Checklist checklist;
  std::vector<DriftedKnob> drifted;  // writable knobs that differ from the profile
  bool repaired = false;             // a repair ran and left nothing drifted
  std::string repair_error;
  std::vector<stack::KnobOutcome> repairs;
};

// Plans the session's knobs and lists what drifted. Never writes.
VerifyReport verify_session(const stack::Session& s, Trigger trigger);

// Applies only the drifted knobs (journaled); fills report.repairs and
// repaired / repair_error.
void repair_drift(const stack::Session& s, VerifyReport& report);

nlohmann::json to_json(const VerifyReport& r);

}  // namespace epyctune::daemon
