// `epyctune verify --profile NAME [--format table|json|md|junit|prometheus] [--ignore-missing]`:
// step 9, the checklist. Exit 0 only when no check fails.
#include <fmt/format.h>

#include "apps/epyctune/commands.hpp"
#include "stack/plan.hpp"
#include "stack/session.hpp"
#include "stack/steps/checklist.hpp"

namespace epyctune::cli {
namespace {

struct VerifyArgs {
  std::string profile, steps, format = "table";
  bool ignore_missing = false, force = false;
};

int run_verify(const VerifyArgs& a, const GlobalOptions& g) {
  try {
    auto format = stack::parse_checklist_format(a.format);
    auto s = stack::open_session({g.sysroot, g.topology_xml, a.profile, a.steps, a.force});
    auto c =
        stack::make_checklist(stack::plan_knobs(s.sys, s.knobs), s.profile.name, a.ignore_missing);
    fmt::print("{}", stack::render_checklist(c, format));
    return c.ok() ? 0 : 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "epyctune verify: {}\n", e.what());
    return 1;
  }
}

void add_verify_command(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<VerifyArgs>();
  auto* cmd = app.add_subcommand("verify", "Check every knob against the profile (step 9)");
  cmd->add_option("--profile", args->profile, "Built-in profile or a TOML file")->required();
  cmd->add_option("--format", args->format, "table, json, md, junit or prometheus")
      ->capture_default_str();
  cmd->add_flag("--ignore-missing", args->ignore_missing,
                "Skip knobs this host does not support instead of failing them");
  cmd->add_option("--steps", args->steps, "Steps to verify (default all)");
  cmd->add_flag("--force", args->force, "Verify even when the profile does not match this host");
  cmd->footer("Exit codes: 0 every check passed or was skipped; 1 bad input; 2 a check failed.");
  cmd->callback([args, &global] { global.exit_code = run_verify(*args, global); });
}

static Registrar reg(&add_verify_command);

}  // namespace
}  // namespace epyctune::cli
