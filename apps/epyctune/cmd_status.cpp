// `epyctune status [--json] [--direct]`, like `tuned-adm active`: which
// profile is applied, which steps it changed, since when, how many knobs the
// journal holds, and whether settings wait for a reboot; when epyctuned runs,
// what it says of itself too. Reads only.
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

// The daemon's own status: its result, {"error": {...}} when it refused,
// null when no daemon runs.
nlohmann::json daemon_status(const GlobalOptions& g) {
  auto d = connect_daemon(g);
  if (!d) return nullptr;
  try {
    return d->call("status", nlohmann::json::object(), kDaemonReadTimeoutMs);
  } catch (const control::ProtocolError& e) {
    spdlog::warn("status: {}", describe(e, "status"));
    return {{"error", {{"code", e.code()}, {"message", e.what()}}}};
  } catch (const std::exception& e) {
    return {{"error", {{"code", control::code::failed}, {"message", e.what()}}}};
  }
}

std::string daemon_text(const nlohmann::json& d, const std::string& socket) {
  if (d.contains("error"))
    return fmt::format("daemon:  epyctuned at {} did not say ({}: {})\n", socket,
                       d["error"].value("code", ""), d["error"].value("message", ""));
  auto str = [&](const char* k) {
    return d.contains(k) && d[k].is_string() ? d[k].get<std::string>() : std::string();
  };
  std::string s = fmt::format(
      "daemon:  epyctuned{}{} at {}\n", str("version").empty() ? "" : " " + str("version"),
      d.contains("pid") ? fmt::format(" (pid {})", d["pid"].dump()) : "", socket);
  if (!str("profile").empty())
    s += fmt::format("         profile {}{}\n", str("profile"),
                     d.value("applied", false) ? ", applied" : ", not applied");
  if (!str("apply_error").empty())
    s += fmt::format("         apply error: {}\n", str("apply_error"));
  if (d.contains("instances") && d["instances"].is_array())
    for (const auto& i : d["instances"])
      if (i.is_object())
        s +=
            fmt::format("         instance {}: {}{}\n", i.value("name", "?"), i.value("state", "?"),
                        instance_cpus(i).empty() ? "" : " on CPUs " + instance_cpus(i));
  return s;
}

int run_status(const GlobalOptions& g, bool as_json, bool direct) {
  try {
    auto st = stack::read_applied_state(host::Sysroot(g.sysroot));
    spdlog::info("status: {} knob(s) in {}", st.knobs, st.journal_path);
    RebootCheck rb;
    if (st.applied) rb = check_reboot(g, st.profile);
    nlohmann::json daemon = direct ? nlohmann::json() : daemon_status(g);
    if (as_json) {
      auto j = to_json(st, rb);
      if (!daemon.is_null()) j["daemon"] = daemon;
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << to_text(st, rb);
      if (!daemon.is_null()) std::cout << daemon_text(daemon, daemon_socket(g));
    }
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
  auto direct = std::make_shared<bool>(false);
  add_json_options(cmd, *as_json, "Machine-readable output (docs/json/status.md)");
  cmd->add_flag("--direct", *direct, "Do not ask epyctuned for its status");
  cmd->callback(
      [as_json, direct, &global] { global.exit_code = run_status(global, *as_json, *direct); });
}

static Registrar reg(&add_status_command);

}  // namespace
}  // namespace epyctune::cli
