// `epyctune apply --profile NAME [--steps 1,2,6] [--check] [--json] [--keep-going] [--force]
// [--direct] [--changed-only]`: write what the plan says, journaled (see lib/stack/apply.hpp).
// Through epyctuned when it runs (its apply calls the same stack::apply_knobs,
// under the same state lock), directly when it does not or with --direct.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "apps/epyctune/commands.hpp"
#include "stack/apply.hpp"
#include "stack/outcome_report.hpp"
#include "stack/session.hpp"

namespace epyctune::cli {
namespace {

struct ApplyArgs {
  std::string profile, steps;
  bool check = false, json = false, keep_going = false, force = false, direct = false;
  bool changed_only = false;
  stack::TextOptions text;  // set from the global options when the command runs
};

void print_text(const stack::ApplyResult& r, bool check, const stack::TextOptions& o) {
  int unchanged = 0;
  for (const auto& k : r.knobs) unchanged += k.status == stack::KnobStatus::Unchanged;
  fmt::print("{}", stack::outcomes_to_text(r.knobs, o));
  for (const auto& n : r.notes) fmt::print("note: {}\n", n);
  // A run refused before it looked at any knob (privilege, lock) has only its error to say.
  if (!r.knobs.empty() || r.error.empty())
    fmt::print("{}changed: {}, reboot required: {}, {} knob(s) already as desired\n",
               check ? "check mode (nothing written): " : "", r.changed ? "true" : "false",
               r.reboot_required ? "true" : "false", unchanged);
  if (!check) fmt::print("{}", stack::outcomes_next_step(r.knobs, false));
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

void print_error(const ApplyArgs& a, const std::string& message, int code) {
  if (a.json)
    fmt::print("{}\n",
               nlohmann::json{{"changed", false}, {"exit_code", code}, {"error", message}}.dump(2));
  fmt::print(stderr, "epyctune apply: {}\n", message);
}

// The same output for a result made here and one the daemon sent.
int print_result(const ApplyArgs& a, const stack::ApplyResult& r, const nlohmann::json& j) {
  spdlog::info("apply: exit code {}, changed {}, reboot required {}", r.exit_code, r.changed,
               r.reboot_required);
  if (a.json) {
    fmt::print("{}\n", j.dump(2));
    if (!r.error.empty())
      fmt::print(stderr, "epyctune apply: {}{}\n", r.error,
                 r.rolled_back ? " (this run's changes were rolled back)" : "");
  } else {
    print_text(r, a.check, a.text);
  }
  return r.exit_code;
}

// stack::to_json(ApplyResult) read back: what the daemon's apply returns.
stack::ApplyResult apply_result_from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("exit_code") || !j["exit_code"].is_number_integer() ||
      !j.contains("steps") || !j["steps"].is_array())
    throw std::runtime_error("epyctuned's apply result has no exit_code and steps");
  stack::ApplyResult r;
  r.changed = j.value("changed", false);
  r.reboot_required = j.value("reboot_required", false);
  r.rolled_back = j.value("rolled_back", false);
  r.exit_code = j["exit_code"].get<int>();
  r.error = j.value("error", "");
  r.notes = j.value("notes", std::vector<std::string>{});
  for (const auto& step : j["steps"])
    if (step.is_object() && step.contains("knobs") && step["knobs"].is_array())
      for (const auto& k : step["knobs"]) r.knobs.push_back(knob_outcome_from_json(k));
  return r;
}

int run_local(const ApplyArgs& a, const GlobalOptions& g) {
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
    return print_result(a, r, stack::to_json(r));
  } catch (const std::exception& e) {
    print_error(a, e.what(), kExitError);
    return kExitError;
  }
}

// nullopt: the daemon did not take the request and the direct path should
// (a dry run an unprivileged user may do without it).
std::optional<int> run_via_daemon(control::Client& d, const ApplyArgs& a) {
  std::error_code ec;
  // The daemon reads a profile file from its own working directory.
  std::string profile = std::filesystem::is_regular_file(a.profile, ec)
                            ? std::filesystem::absolute(a.profile).string()
                            : a.profile;
  nlohmann::json params{{"profile", profile},
                        {"steps", a.steps},
                        {"check", a.check},
                        {"keep_going", a.keep_going},
                        {"force", a.force}};
  try {
    auto result = d.call("apply", params, kDaemonWriteTimeoutMs);
    return print_result(a, apply_result_from_json(result), result);
  } catch (const control::ProtocolError& e) {
    if (a.check && e.code() == control::code::forbidden) {
      spdlog::info("apply --check: epyctuned refused ({}); checking directly", e.what());
      return std::nullopt;
    }
    int code = exit_code_for(e);
    bool hint = e.code() != control::code::failed && e.code() != control::code::forbidden;
    print_error(a, describe(e, "apply") + (hint ? "; --direct applies without the daemon" : ""),
                code);
    return code;
  } catch (const std::exception& e) {
    print_error(a, e.what(), kExitError);
    return kExitError;
  }
}

int run_apply(const ApplyArgs& a, const GlobalOptions& g) {
  // --topology describes another host than the daemon's: only the direct
  // path reads it.
  if (!a.direct && g.topology_xml.empty())
    if (auto d = connect_daemon(g))
      if (auto code = run_via_daemon(*d, a)) return *code;
  return run_local(a, g);
}

void add_apply_command(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<ApplyArgs>();
  auto* cmd =
      app.add_subcommand("apply", "Apply the stack's steps, journaled so revert can undo them");
  cmd->add_option("--profile", args->profile, "Built-in profile or a TOML file")->required();
  cmd->add_option("--steps", args->steps,
                  "Steps to apply: 1,2,6 or bios,numa or 1-4 (default all)");
  cmd->add_flag("--check", args->check, "Dry run (Ansible check mode): say what would change");
  add_json_options(cmd, args->json, "JSON: changed, reboot_required, per step/knob status");
  cmd->add_flag("--keep-going", args->keep_going,
                "On a failed write, continue instead of rolling back this run");
  cmd->add_flag("--force", args->force, "Apply even when the profile does not match this host");
  cmd->add_flag("--changed-only", args->changed_only,
                "List only the knobs written (or, with --check, that would be) and failures");
  cmd->add_flag("--direct", args->direct,
                "Apply here even when epyctuned runs (both take the same state lock)");
  cmd->callback([args, &global] {
    args->text = text_options(global, args->changed_only);
    global.exit_code = run_apply(*args, global);
  });
}

static Registrar reg(&add_apply_command);

}  // namespace
}  // namespace epyctune::cli
