#include "stack/plan.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <map>

#include "stack/privileges.hpp"

namespace epyctune::stack {

std::string to_string(PlanStatus s) {
  switch (s) {
    case PlanStatus::Unchanged:
      return "unchanged";
    case PlanStatus::Change:
      return "change";
    case PlanStatus::Unsupported:
      return "unsupported";
    case PlanStatus::Manual:
      return "manual";
    case PlanStatus::Pending:
      return "pending-reboot";
    case PlanStatus::Info:
      return "info";
  }
  return "?";
}

std::string KnobPlan::desired_display() const {
  if (!knob.desired) return "";
  if (knob.loc.kind == KnobKind::File) return *knob.desired;
  if (knob.loc.kind == KnobKind::Value || knob.loc.kind == KnobKind::Cmdline) {
    try {
      return canonical(knob.loc.canon, *knob.desired);
    } catch (const std::exception&) {
      return *knob.desired;
    }
  }
  return *knob.desired;
}

KnobPlan plan_knob(const host::Sysroot& sys, const Knob& knob) {
  KnobPlan p;
  p.knob = knob;
  if (!knob.unsupported.empty()) {
    p.status = PlanStatus::Unsupported;
    p.reason = knob.unsupported;
    return p;
  }
  if (knob.informational) {
    p.status = PlanStatus::Info;
    p.reason = knob.instruction;
    if (knob.loc.kind == KnobKind::Check) p.current = read_knob(sys, knob);
    return p;
  }
  try {
    check_pretended_read(sys, knob.loc.path);
    p.current = read_knob(sys, knob);
  } catch (const host::HostError& e) {
    spdlog::debug("read {}/{}: {}", knob.step, knob.name, e.what());
    p.status = PlanStatus::Unsupported;
    p.reason = fmt::format("cannot read: {}", e.what());
    p.read_errno = e.err();
    p.read_error = e.what();
    return p;
  }
  spdlog::debug("read {}/{}: {} = {}", knob.step, knob.name, knob.loc.path, p.current.display());
  if (!knob.desired) {
    p.status = PlanStatus::Unchanged;
    return p;
  }
  if (knob.loc.kind == KnobKind::Value && !p.current.present) {
    p.status = PlanStatus::Unsupported;
    p.reason = fmt::format("{} does not exist on this host", knob.loc.path);
    return p;
  }
  bool matches = false;
  try {
    matches = knob_matches(knob.loc, p.current, *knob.desired);
  } catch (const std::exception& e) {
    p.status = PlanStatus::Unsupported;
    p.reason = fmt::format("cannot compare '{}' with '{}': {}", p.current.display(), *knob.desired,
                           e.what());
    return p;
  }
  if (matches) {
    p.status = PlanStatus::Unchanged;
  } else if (knob.read_only) {
    p.status = knob.satisfied_by.empty() ? PlanStatus::Manual : PlanStatus::Pending;
    p.reason = knob.instruction;
  } else {
    p.status = PlanStatus::Change;
    if (knob.reboot_required) p.reason = "takes effect at next boot";
  }
  return p;
}

std::vector<KnobPlan> plan_knobs(const host::Sysroot& sys, const std::vector<Knob>& knobs) {
  std::vector<KnobPlan> out;
  out.reserve(knobs.size());
  std::map<std::string, PlanStatus> by_key;
  for (const auto& k : knobs) {
    out.push_back(plan_knob(sys, k));
    by_key[k.loc.key()] = out.back().status;
  }
  // A boot-time check is only pending when the knob that fixes it is planned
  // and writable; otherwise the operator has to act.
  for (auto& p : out) {
    if (p.status != PlanStatus::Pending) continue;
    auto fixer = by_key.find(p.knob.satisfied_by);
    if (fixer == by_key.end() ||
        (fixer->second != PlanStatus::Unchanged && fixer->second != PlanStatus::Change)) {
      p.status = PlanStatus::Manual;
    } else {
      p.reason = fixer->second == PlanStatus::Change
                     ? "apply writes the boot configuration; takes effect at next boot"
                     : "boot configuration is written; takes effect at next boot";
    }
  }
  return out;
}

}  // namespace epyctune::stack
