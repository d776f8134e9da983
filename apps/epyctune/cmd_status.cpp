// `epyctune status [--json]`, like `tuned-adm active`: which profile is
// applied, which steps it changed, since when, how many knobs the journal
// holds, and whether settings wait for a reboot. Reads only.
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <map>

#include "apps/epyctune/commands.hpp"
#include "stack/applied.hpp"
#include "stack/plan.hpp"

namespace epyctune::cli {
namespace {

struct RebootCheck {
  bool known = false;
  std::vector<std::string> pending;  // "step/knob" of boot-time checks waiting for a reboot
  std::string why_unknown;
};

// A reboot is pending when a boot-time check fails although the boot
// configuration that fixes it is already written (its fixer is unchanged).
RebootCheck check_reboot(const GlobalOptions& g, const std::string& profile) {
  RebootCheck r;
  try {
    auto s = open_session(g, profile, "", /*force=*/true);
    auto plans = stack::plan_knobs(s.sys, s.knobs);
    std::map<std::string, stack::PlanStatus> by_key;
    for (const auto& p : plans) by_key[p.knob.loc.key()] = p.status;
    for (const auto& p : plans) {
      if (p.status != stack::PlanStatus::Pending) continue;
      auto fixer = by_key.find(p.knob.satisfied_by);
      if (fixer != by_key.end() && fixer->second == stack::PlanStatus::Unchanged)
        r.pending.push_back(p.knob.step + "/" + p.knob.name);
    }
    r.known = true;
  } catch (const std::exception& e) {
    r.why_unknown = fmt::format("cannot plan profile {}: {}", profile, e.what());
    spdlog::warn("status: {}", r.why_unknown);
  }
  return r;
}

std::string iso_time(std::time_t t) {
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(t));
}

nlohmann::json to_json(const stack::AppliedState& st, const RebootCheck& rb) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& [step, n] : st.steps) steps.push_back({{"step", step}, {"knobs", n}});
  nlohmann::json j{{"applied", st.applied},
                   {"journal", st.journal_path},
                   {"profile", st.applied ? nlohmann::json(st.profile) : nlohmann::json()},
                   {"profiles", st.profiles},
                   {"since", st.since ? nlohmann::json(iso_time(*st.since)) : nlohmann::json()},
                   {"knobs", st.knobs},
                   {"steps", steps},
                   {"reboot_pending", nullptr},
                   {"reboot_pending_knobs", rb.pending}};
  if (rb.known) j["reboot_pending"] = !rb.pending.empty();
  if (!rb.why_unknown.empty()) j["reboot_check_error"] = rb.why_unknown;
  return j;
}

std::string to_text(const stack::AppliedState& st, const RebootCheck& rb) {
  if (!st.applied)
    return fmt::format("nothing applied (no journaled knobs in {})\n", st.journal_path);
  std::string s = fmt::format("profile: {}\n", st.profile);
  if (st.profiles.size() > 1)
    s += fmt::format("         (the journal also holds knobs first changed by: {})\n",
                     fmt::join(st.profiles.begin(), st.profiles.end() - 1, ", "));
  if (st.since) s += fmt::format("since:   {} (last journal write)\n", iso_time(*st.since));
  std::vector<std::string> steps;
  for (const auto& [step, n] : st.steps) steps.push_back(fmt::format("{} ({})", step, n));
  s += fmt::format("steps:   {}\n", fmt::join(steps, ", "));
  s += fmt::format("knobs:   {} journaled in {}\n", st.knobs, st.journal_path);
  if (!rb.known)
    s += fmt::format("reboot:  unknown ({})\n", rb.why_unknown);
  else if (rb.pending.empty())
    s += "reboot:  not pending\n";
  else
    s += fmt::format("reboot:  pending: {} boot-time setting(s) take effect at next boot ({})\n",
                     rb.pending.size(), fmt::join(rb.pending, ", "));
  if (st.torn_tail) s += "note:    the journal ends in a half-written line (a crash mid-apply)\n";
  return s;
}

int run_status(const GlobalOptions& g, bool as_json) {
  try {
    auto st = stack::read_applied_state(host::Sysroot(g.sysroot));
    spdlog::info("status: {} knob(s) in {}", st.knobs, st.journal_path);
    RebootCheck rb;
    if (st.applied) rb = check_reboot(g, st.profile);
    if (as_json)
      std::cout << to_json(st, rb).dump(2) << "\n";
    else
      std::cout << to_text(st, rb);
    return kExitOk;
  } catch (const std::exception& e) {
    fmt::print(stderr, "epyctune status: {}\n", e.what());
    return kExitError;
  }
}

void add_status_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand(
      "status", "What is applied: profile, steps, since when, journaled knobs, pending reboot");
  auto as_json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *as_json, "Machine-readable output (docs/json/status.md)");
  cmd->callback([as_json, &global] { global.exit_code = run_status(global, *as_json); });
}

static Registrar reg(&add_status_command);

}  // namespace
}  // namespace epyctune::cli
