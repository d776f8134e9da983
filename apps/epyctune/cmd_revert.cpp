// `epyctune revert [--json]`: restore every original in the journal, newest
// first, then clear it. Needs no profile: the journal describes each knob.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "apps/epyctune/commands.hpp"
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

void add_revert_command(CLI::App& app, GlobalOptions& global) {
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("revert", "Restore every value epyctune changed, newest first");
  cmd->add_flag("--json", *json, "JSON output");
  cmd->callback([json, &global] { global.exit_code = run_revert(*json, global); });
}

static Registrar reg(&add_revert_command);

}  // namespace
}  // namespace epyctune::cli
