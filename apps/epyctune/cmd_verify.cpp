// `epyctune verify [--profile NAME] [--format table|json|md|junit|prometheus] [--json]
// [--ignore-missing] [--output FILE]`: step 9, the checklist. Exit 0 only when no
// check fails; 4 when none fails but some could not be read without root.
// --output replaces FILE atomically, so node_exporter's textfile collector
// (which reads *.prom in its directory at every scrape) never sees half a file.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <stdexcept>

#include "apps/epyctune/commands.hpp"
#include "common/atomic_file.hpp"
#include "stack/applied.hpp"
#include "stack/checklist.hpp"
#include "stack/plan.hpp"
#include "stack/session.hpp"

namespace epyctune::cli {
namespace {

struct VerifyArgs {
  std::string profile, steps, format = "table", output;
  bool ignore_missing = false, force = false;
};

// No --profile: the profile the journal says is applied.
std::string profile_to_verify(const VerifyArgs& a, const GlobalOptions& g) {
  if (!a.profile.empty()) return a.profile;
  auto st = stack::read_applied_state(host::Sysroot(g.sysroot));
  if (!st.applied)
    throw std::runtime_error(fmt::format(
        "nothing is applied ({} holds no knobs), so there is no profile to verify against; name "
        "one with --profile",
        st.journal_path));
  spdlog::info("verify: profile {} (applied, from {})", st.profile, st.journal_path);
  return st.profile;
}

int run_verify(const VerifyArgs& a, const GlobalOptions& g) {
  try {
    auto format = stack::parse_checklist_format(a.format);
    auto s = open_session(g, profile_to_verify(a, g), a.steps, a.force);
    auto c =
        stack::make_checklist(stack::plan_knobs(s.sys, s.knobs), s.profile.name, a.ignore_missing);
    std::string text = stack::render_checklist(
        c, format, text_options(g, false, a.output.empty() ? STDOUT_FILENO : -1));
    if (a.output.empty())
      fmt::print("{}", text);
    else
      write_file_atomic(a.output, text, 0644);
    // Drift first: it is known. Checks that could not be read say nothing
    // either way, and are a missing privilege, not drift.
    if (!c.ok()) return kExitFailed;
    if (c.needs_root > 0) {
      if (format != stack::ChecklistFormat::Table || !a.output.empty())
        fmt::print(stderr, "epyctune verify: {} check(s) need root and were not read\n",
                   c.needs_root);
      return kExitPrivilege;
    }
    return kExitOk;
  } catch (const std::exception& e) {
    fmt::print(stderr, "epyctune verify: {}\n", e.what());
    return kExitError;
  }
}

void add_verify_command(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<VerifyArgs>();
  auto* cmd = app.add_subcommand("verify", "Check every knob against the profile (step 9)");
  cmd->add_option("--profile", args->profile,
                  "Built-in profile or a TOML file (default: the applied one, see `status`)");
  auto* format = cmd->add_option("--format", args->format, "table, json, md, junit or prometheus")
                     ->capture_default_str();
  // --json is what every other command with JSON output takes.
  cmd->add_flag_callback(
         "--json", [args] { args->format = "json"; }, "The same as --format json")
      ->excludes(format);
  cmd->add_flag("--ignore-missing", args->ignore_missing,
                "Skip knobs this host does not support instead of failing them");
  cmd->add_option("--output", args->output,
                  "Write the result to FILE atomically (temp file and rename) instead of stdout, "
                  "e.g. a node_exporter textfile (a path on this machine, not beneath --sysroot)");
  cmd->add_option("--steps", args->steps, "Steps to verify (default all)");
  cmd->add_flag("--force", args->force, "Verify even when the profile does not match this host");
  cmd->callback([args, &global] { global.exit_code = run_verify(*args, global); });
}

static Registrar reg(&add_verify_command);

}  // namespace
}  // namespace epyctune::cli
