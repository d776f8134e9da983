// `epyctune plan --profile NAME|FILE [--json] [--force] [--steps ...]
// [--changed-only]`: the partition and every knob's current value, desired
// value and status (per-CPU knobs folded into CPU lists; -v shows each).
// Reads only: safe on a live host without root.
#include <fmt/format.h>

#include "apps/epyctune/commands.hpp"
#include "stack/plan.hpp"
#include "stack/plan_report.hpp"
#include "stack/session.hpp"

namespace epyctune::cli {
namespace {

struct PlanArgs {
  std::string profile, steps;
  bool json = false, force = false, changed_only = false;
};

int run_plan(const PlanArgs& a, const GlobalOptions& g) {
  try {
    auto s = open_session(g, a.profile, a.steps, a.force);
    auto plans = stack::plan_knobs(s.sys, s.knobs);
    if (a.json)
      fmt::print("{}\n", stack::plan_to_json(s, plans).dump(2));
    else
      fmt::print("{}", stack::plan_to_text(s, plans, text_options(g, a.changed_only)));
    return kExitOk;
  } catch (const std::exception& e) {
    fmt::print(stderr, "epyctune plan: {}\n", e.what());
    return kExitError;
  }
}

void add_plan_command(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "Show the partition and, per step, each knob's current/desired value (no writes)");
  cmd->add_option("--profile", args->profile,
                  "Built-in profile (9754, epyc-9354, ...) or a TOML file")
      ->required();
  add_json_options(cmd, args->json, "Machine-readable output (schema in docs/json/stack.md)");
  cmd->add_flag("--force", args->force, "Plan even when the profile does not match this host");
  cmd->add_option("--steps", args->steps, "Steps to plan: 1,2,6 or bios,numa or 1-4 (default all)");
  cmd->add_flag("--changed-only", args->changed_only, "Show only the knobs apply would change");
  cmd->callback([args, &global] { global.exit_code = run_plan(*args, global); });
}

static Registrar reg(&add_plan_command);

}  // namespace
}  // namespace epyctune::cli
