#include "daemon/drift.hpp"

#include <spdlog/spdlog.h>

#include <set>

namespace epyctune::daemon {

namespace {
std::vector<stack::KnobPlan> plans_of(const stack::Session& s) {
  return stack::plan_knobs(s.sys, s.knobs);
}
}  // namespace

const char* trigger_name(Trigger t) {
  switch (t) {
    case Trigger::start:
      return "start";
    case Trigger::reload:
      return "reload";
    case Trigger::interval:
      return "interval";
    case Trigger::uevent:
      return "uevent";
    case Trigger::request:
      return "request";
  }
  return "?";
}

VerifyReport verify_session(const stack::Session& s, Trigger trigger) {
  VerifyReport r;
  r.at = std::time(nullptr);
  r.trigger = trigger;
  auto plans = plans_of(s);
  r.checklist = stack::make_checklist(plans, s.profile.name, /*ignore_missing=*/true);
  for (const auto& p : plans)
    if (p.status == stack::PlanStatus::Change)
      r.drifted.push_back(
          {p.knob.step, p.knob.name, p.knob.loc.path, p.current.display(), p.desired_display()});
  return r;
}

void repair_drift(const stack::Session& s, VerifyReport& report) {
  if (report.drifted.empty()) return;
  std::set<std::string> names;
  for (const auto& d : report.drifted) names.insert(d.step + "\n" + d.name);
  std::vector<stack::Knob> knobs;
  for (const auto& k : s.knobs)
    if (names.count(k.step + "\n" + k.name)) knobs.push_back(k);
  stack::ApplyOptions opts;
  opts.profile = s.profile.name;
  auto r = stack::apply_knobs(s.sys, knobs, opts);
  for (const auto& o : r.knobs)
    if (o.status != stack::KnobStatus::Unchanged) report.repairs.push_back(o);
  report.repair_error = r.error;
  report.repaired = r.exit_code == stack::kExitOk;
  for (const auto& o : report.repairs)
    spdlog::info("drift: repaired {} {}: {} -> {} ({})", o.step, o.name, o.before, o.after,
                 stack::to_string(o.status));
  if (!r.error.empty()) spdlog::error("drift: repair failed: {}", r.error);
}

nlohmann::json to_json(const VerifyReport& r) {
  nlohmann::json drifted = nlohmann::json::array();
  for (const auto& d : r.drifted)
    drifted.push_back({{"step", d.step},
                       {"knob", d.name},
                       {"path", d.path},
                       {"current", d.current},
                       {"desired", d.desired}});
  nlohmann::json repairs = nlohmann::json::array();
  for (const auto& o : r.repairs) repairs.push_back(stack::to_json(o));
  return {{"at", r.at},
          {"trigger", trigger_name(r.trigger)},
          {"passed", r.checklist.passed},
          {"failed", r.checklist.failed},
          {"skipped", r.checklist.skipped},
          {"ok", r.checklist.ok()},
          {"drifted", drifted},
          {"repaired", r.repaired},
          {"repairs", repairs},
          {"repair_error", r.repair_error}};
}

}  // namespace epyctune::daemon
