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
#include "stack/outcome_report.hpp"
#include "stack/revert.hpp"

namespace epyctune::cli {
namespace {

// Text: each value on one line (a file's text as its first line and a line
// count), per-CPU knobs folded unless -v; --json has every byte.
int print_result(const stack::RevertResult& r, const nlohmann::json& j, bool json,
                 const stack::TextOptions& text) {
  if (json) {
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}", stack::outcomes_to_text(r.knobs, text));
    for (const auto& n : r.notes) fmt::print("note: {}\n", n);
    if (r.had_journal) fmt::print("reverted {} journaled knob(s)\n", r.knobs.size());
    fmt::print("{}", stack::outcomes_next_step(r.knobs, true));
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

int run_via_daemon(control::Client& d, bool json, const stack::TextOptions& text) {
  try {
    auto result = d.call("revert", nlohmann::json::object(), kDaemonWriteTimeoutMs);
    return print_result(revert_result_from_json(result), result, json, text);
  } catch (const control::ProtocolError& e) {
    fmt::print(stderr, "epyctune revert: {}\n", describe(e, "revert"));
    return exit_code_for(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "epyctune revert: {}\n", e.what());
    return kExitError;
  }
}

int run_revert(bool json, bool direct, const GlobalOptions& g) {
  const auto text = text_options(g, false);
  if (!direct)
    if (auto d = connect_daemon(g)) return run_via_daemon(*d, json, text);
  try {
    spdlog::info("revert: journal under {}", g.sysroot);
    auto r = stack::revert_journal(host::Sysroot(g.sysroot));
    return print_result(r, stack::to_json(r), json, text);
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
  add_json_options(cmd, *json, "JSON output");
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
