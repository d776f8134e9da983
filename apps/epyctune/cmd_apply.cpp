// `epyctune apply --profile NAME [--steps 1,2,6] [--check] [--json] [--keep-going] [--force]`:
// write what the plan says, journaled (see lib/stack/apply.hpp).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "apps/epyctune/commands.hpp"
#include "stack/apply.hpp"
#include "stack/session.hpp"

namespace epyctune::cli {
namespace {

struct ApplyArgs {
  std::string profile, steps;
  bool check = false, json = false, keep_going = false, force = false;
};

void print_text(const stack::ApplyResult& r, bool check) {
  std::string step;
  int unchanged = 0;
  for (const auto& o : r.knobs) {
    if (o.status == "unchanged") {
      ++unchanged;
      continue;
    }
    if (o.step != step) {
      step = o.step;
      fmt::print("{}:\n", step);
    }
    std::string line = fmt::format("  {:<12} {}", o.status, o.name);
    if (o.status == "applied" || o.status == "would-apply" || o.status == "mismatch" ||
        o.status == "rolled-back")
      line += fmt::format(": {} -> {}", o.before, o.after);
    if (!o.reason.empty()) line += "  (" + o.reason + ")";
    std::replace(line.begin(), line.end(), '\n', ' ');
    fmt::print("{}\n", line);
  }
  for (const auto& n : r.notes) fmt::print("note: {}\n", n);
  fmt::print("{}changed: {}, reboot required: {}, {} knob(s) already as desired\n",
             check ? "check mode (nothing written): " : "", r.changed ? "true" : "false",
             r.reboot_required ? "true" : "false", unchanged);
  if (!r.error.empty())
    fmt::print(stderr, "epyctune apply: {}{}\n", r.error,
               r.rolled_back ? " (this run's changes were rolled back)" : "");
}

// "applying step 4/8: cat (12/40 knobs)" on one rewritten stderr line, for a
// terminal only: logs and pipes get no control characters.
class ProgressLine {
 public:
  explicit ProgressLine(const std::vector<stack::Knob>& knobs) {
    for (const auto& k : knobs) {
      if (steps_.empty() || steps_.back().name != k.step) steps_.push_back({k.step, 0});
      steps_.back().knobs++;
      where_.push_back({steps_.size() - 1, steps_.back().knobs});
    }
  }
  void operator()(const stack::ApplyProgress& p) {
    if (p.index >= where_.size()) return;
    auto [step, nth] = where_[p.index];
    fmt::print(stderr, "\r\033[Kapplying step {}/{}: {} ({}/{} knobs)", step + 1, steps_.size(),
               steps_[step].name, nth, steps_[step].knobs);
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (shown_) fmt::print(stderr, "\r\033[K");
  }

 private:
  struct Step {
    std::string name;
    size_t knobs = 0;
  };
  std::vector<Step> steps_;
  std::vector<std::pair<size_t, size_t>> where_;  // per knob: step index, 1-based place in it
  bool shown_ = false;
};

int run_apply(const ApplyArgs& a, const GlobalOptions& g) {
  try {
    auto s = open_session(g, a.profile, a.steps, a.force);
    stack::ApplyOptions opts;
    opts.check = a.check;
    opts.keep_going = a.keep_going;
    opts.profile = s.profile.name;
    ProgressLine progress(s.knobs);
    if (!a.check && isatty(STDERR_FILENO))
      opts.on_progress = [&progress](const stack::ApplyProgress& p) { progress(p); };
    auto r = stack::apply_knobs(s.sys, s.knobs, opts);
    progress.clear();
    spdlog::info("apply: exit code {}, changed {}, reboot required {}", r.exit_code, r.changed,
                 r.reboot_required);
    if (a.json) {
      fmt::print("{}\n", stack::to_json(r).dump(2));
      if (!r.error.empty())
        fmt::print(stderr, "epyctune apply: {}{}\n", r.error,
                   r.rolled_back ? " (this run's changes were rolled back)" : "");
    } else {
      print_text(r, a.check);
    }
    return r.exit_code;
  } catch (const std::exception& e) {
    if (a.json)
      fmt::print(
          "{}\n",
          nlohmann::json{{"changed", false}, {"exit_code", kExitError}, {"error", e.what()}}.dump(
              2));
    fmt::print(stderr, "epyctune apply: {}\n", e.what());
    return kExitError;
  }
}

void add_apply_command(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<ApplyArgs>();
  auto* cmd =
      app.add_subcommand("apply", "Apply the stack's steps, journaled so revert can undo them");
  cmd->add_option("--profile", args->profile, "Built-in profile or a TOML file")->required();
  cmd->add_option("--steps", args->steps,
                  "Steps to apply: 1,2,6 or bios,numa or 1-4 (default all)");
  cmd->add_flag("--check", args->check, "Dry run (Ansible check mode): say what would change");
  cmd->add_flag("--json", args->json, "JSON: changed, reboot_required, per step/knob status");
  cmd->add_flag("--keep-going", args->keep_going,
                "On a failed write, continue instead of rolling back this run");
  cmd->add_flag("--force", args->force, "Apply even when the profile does not match this host");
  cmd->callback([args, &global] { global.exit_code = run_apply(*args, global); });
}

static Registrar reg(&add_apply_command);

}  // namespace
}  // namespace epyctune::cli
