// `epyctune revert [--json]`: restore every original in the journal, newest
// first, then clear it. Needs no profile: the journal describes each knob.
// --unless-shutdown keeps the state when systemd is taking the system down
// (the apply unit's ExecStop), like tuned's rollback = not_on_exit.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "apps/epyctune/commands.hpp"
#include "host/shutdown.hpp"
#include "stack/revert.hpp"

namespace epyctune::cli {
namespace {

int run_revert(bool json, const GlobalOptions& g) {
  try {
    spdlog::info("revert: journal under {}", g.sysroot);
    auto r = stack::revert_journal(host::Sysroot(g.sysroot));
    if (json) {
      fmt::print("{}\n", stack::to_json(r).dump(2));
    } else {
      for (const auto& o : r.knobs)
        if (o.status != "unchanged")
          fmt::print("  {:<9} {}/{}: {} -> {}{}\n", o.status, o.step, o.name, o.before, o.after,
                     o.reason.empty() ? "" : "  (" + o.reason + ")");
      for (const auto& n : r.notes) fmt::print("note: {}\n", n);
      if (r.had_journal) fmt::print("reverted {} journaled knob(s)\n", r.knobs.size());
    }
    if (!r.error.empty()) fmt::print(stderr, "epyctune revert: {}\n", r.error);
    return r.exit_code;
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
  auto unless_shutdown = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("revert", "Restore every value epyctune changed, newest first");
  cmd->add_flag("--json", *json, "JSON output");
  cmd->add_flag("--unless-shutdown", *unless_shutdown,
                "Do nothing when systemd is shutting the system down (for a unit's ExecStop)");
  cmd->callback([json, unless_shutdown, &global] {
    if (*unless_shutdown && host::system_shutting_down()) {
      global.exit_code = keep_for_shutdown(*json);
      return;
    }
    global.exit_code = run_revert(*json, global);
  });
}

static Registrar reg(&add_revert_command);

}  // namespace
}  // namespace epyctune::cli
