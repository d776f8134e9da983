// `epyctune revert [--json] [--direct] [--unless-shutdown]`: restore every
// original in the journal, newest first, then clear it. Needs no profile: the
// journal describes each knob. Through epyctuned when it runs (its revert
// replays the same journal under the same state lock), directly when it does
// not. --unless-shutdown keeps the state when systemd is taking the system
// down (the apply unit's ExecStop), like tuned's rollback = not_on_exit.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "apps/epyctune/commands.hpp"
#include "host/shutdown.hpp"
#include "stack/revert.hpp"

namespace epyctune::cli {
namespace {

int print_result(const stack::RevertResult& r, const nlohmann::json& j, bool json) {
  if (json) {
    fmt::print("{}\n", j.dump(2));
  } else {
    for (const auto& o : r.knobs)
      if (o.status != stack::KnobStatus::Unchanged)
        fmt::print("  {:<9} {}/{}: {} -> {}{}\n", stack::to_string(o.status), o.step, o.name,
                   o.before, o.after, o.reason.empty() ? "" : "  (" + o.reason + ")");
    for (const auto& n : r.notes) fmt::print("note: {}\n", n);
    if (r.had_journal) fmt::print("reverted {} journaled knob(s)\n", r.knobs.size());
  }
  if (!r.error.empty()) fmt::print(stderr, "epyctune revert: {}\n", r.error);
  return r.exit_code;
}

// stack::to_json(RevertResult) read back: what the daemon's revert returns.
stack::RevertResult revert_result_from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("exit_code") || !j["exit_code"].is_number_integer() ||
      !j.contains("knobs") || !j["knobs"].is_array())
    throw std::runtime_error("epyctuned's revert result has no exit_code and knobs");
  stack::RevertResult r;
  r.had_journal = j.value("had_journal", false);
  r.changed = j.value("changed", false);
  r.exit_code = j["exit_code"].get<int>();
  r.error = j.value("error", "");
  r.notes = j.value("notes", std::vector<std::string>{});
  for (const auto& k : j["knobs"]) r.knobs.push_back(knob_outcome_from_json(k));
  return r;
}

int run_via_daemon(control::Client& d, bool json) {
  try {
    auto result = d.call("revert", nlohmann::json::object(), kDaemonWriteTimeoutMs);
    return print_result(revert_result_from_json(result), result, json);
  } catch (const control::ProtocolError& e) {
    fmt::print(stderr, "epyctune revert: {}\n", describe(e, "revert"));
    return exit_code_for(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "epyctune revert: {}\n", e.what());
    return kExitError;
  }
}

int run_revert(bool json, bool direct, const GlobalOptions& g) {
  if (!direct)
    if (auto d = connect_daemon(g)) return run_via_daemon(*d, json);
  try {
    spdlog::info("revert: journal under {}", g.sysroot);
    auto r = stack::revert_journal(host::Sysroot(g.sysroot));
    return print_result(r, stack::to_json(r), json);
  } catch (const std::exception& e) {
    fmt::print(stderr, "epyctune revert: {}\n", e.what());
    return kExitError;
  }
}

// One line, so the journal shows one event; nothing is read or written.
int keep_for_shutdown(bool json) {
  const char* why = "the system is shutting down: keeping the applied state";
  if (json)
    fmt::print("{}\n", nlohmann::json{{"changed", false}, {"kept", why}}.dump());
  else
    fmt::print("epyctune revert: {} (--unless-shutdown)\n", why);
  return kExitOk;
}

void add_revert_command(CLI::App& app, GlobalOptions& global) {
  auto json = std::make_shared<bool>(false);
  auto direct = std::make_shared<bool>(false);
  auto unless_shutdown = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("revert", "Restore every value epyctune changed, newest first");
  cmd->add_flag("--json", *json, "JSON output");
  cmd->add_flag("--direct", *direct,
                "Revert here even when epyctuned runs (both take the same state lock)");
  cmd->add_flag("--unless-shutdown", *unless_shutdown,
                "Do nothing when systemd is shutting the system down (for a unit's ExecStop)");
  cmd->callback([json, direct, unless_shutdown, &global] {
    if (*unless_shutdown && host::system_shutting_down()) {
      global.exit_code = keep_for_shutdown(*json);
      return;
    }
    global.exit_code = run_revert(*json, *direct, global);
  });
}

static Registrar reg(&add_revert_command);

}  // namespace
}  // namespace epyctune::cli
