#include "bench/stack_driver.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "bench/bandwidth_probe.hpp"
#include "bench/engine_process.hpp"
#include "bench/interrupt.hpp"
#include "engine/runtime/cpus.hpp"
#include "launch/engine_side.hpp"
#include "stack/apply.hpp"
#include "stack/plan.hpp"
#include "stack/revert.hpp"
#include "stack/steps.hpp"

namespace epyctune::bench {

namespace fs = std::filesystem;

std::vector<StepRef> bench_steps(const std::string& steps_spec) {
  std::vector<StepRef> out;
  for (int n : stack::parse_steps(steps_spec)) {
    const stack::Step* st = stack::find_step(n);
    if (!st->build) continue;  // changes nothing there is to measure (verify)
    out.push_back({st->number, st->name, st->title, st->drafts});
  }
  return out;
}

EngineLaunch engine_launch(const stack::Session& s, const std::string& launch_config,
                           const EngineRunOptions& o, bool speculative, const fs::path& work_dir) {
  EngineLaunch l;
  const bool fixture = !s.sys.is_live();
  if (launch_config.empty()) {
    // The engine's own partition picker, target alone: the stock engine.
    l.args.insert(l.args.end(), {"--model", o.model});
    l.target_cpus = engine::runtime::allowed_cpus();
    return l;
  }
  launch::LaunchPlan plan = launch::parse_launch_config(
      launch_config, s.sys.resolve(s.profile.spec.launch_config).string());
  plan.has_models = true;
  plan.profile = s.profile.name;
  plan.models.target = o.model;
  plan.models.draft = speculative ? o.draft : "";
  plan.models.lookup = speculative ? o.lookup : 0;
  const fs::path file = work_dir / "engine.toml";
  {
    std::ofstream f(file, std::ios::trunc);
    f << launch::to_toml(plan);
    if (!f) throw std::runtime_error("cannot write " + file.string());
  }
  l.args.insert(l.args.end(), {"--launch-config", file.string()});
  if (fixture) {
    // The fixture's resctrl tree stands in for /sys/fs/resctrl; its CPUs are
    // not this machine's, so the engine maps them (and says so).
    l.args.insert(l.args.end(),
                  {"--resctrl-root", s.sys.resolve("/sys/fs/resctrl").string(), "--map-cpus"});
  }
  if (plan.has_spec) {
    // The engine places the plan with the same function (--map-cpus on a
    // fixture), so the probe measures the CPUs the target will run on.
    auto placed = launch::place_on(plan, engine::runtime::allowed_cpus(), fixture);
    l.target_cpus = placed.verify.cpus;
    l.note = placed.reason;
  } else {
    l.target_cpus = engine::runtime::allowed_cpus();
  }
  return l;
}

StackDriver::StackDriver(const stack::Session& s, EngineRunOptions o, fs::path work_dir,
                         size_t bandwidth_mib)
    : s_(s), o_(std::move(o)), work_dir_(std::move(work_dir)), bw_mib_(bandwidth_mib) {}

bool StackDriver::interrupted() const {
  return bench::interrupted();
}

void StackDriver::to_stock() {
  applied_.clear();
  auto r = stack::revert_journal(s_.sys);
  if (r.exit_code != stack::kExitOk)
    throw std::runtime_error("revert failed: " + r.error +
                             " (run `epyctune revert` to finish it; the journal is kept)");
}

StepOutcome StackDriver::apply_step(const StepRef& step) {
  if (step.drafts && o_.draft.empty() && o_.lookup <= 0)
    return {RowState::skipped, "no --draft or --lookup, nothing to draft with"};
  const auto& part_error = s_.partition_error;
  // The session's one probe of the host, not a second one per step.
  stack::StepContext ctx{s_.sys, s_.profile, s_.topo, s_.part, part_error, &s_.caps};
  auto knobs = stack::build_knobs(ctx, {step.step});
  auto plans = stack::plan_knobs(s_.sys, knobs);
  bool actionable = false, reboot = false;
  std::string why;
  for (const auto& p : plans) {
    if (p.status == stack::PlanStatus::Change || p.status == stack::PlanStatus::Unchanged)
      actionable = true;
    if ((p.status == stack::PlanStatus::Change && p.knob.reboot_required) ||
        p.status == stack::PlanStatus::Pending)
      reboot = true;
    if (why.empty() && p.status == stack::PlanStatus::Unsupported) why = p.reason;
  }
  if (!actionable)
    return {RowState::skipped, why.empty() ? std::string("nothing this host can change") : why};
  auto r = stack::apply_knobs(s_.sys, knobs, {false, false, s_.profile.name});
  if (r.exit_code != stack::kExitOk) return {RowState::unsupported, r.error};
  applied_.push_back(step.step);
  if (reboot || r.reboot_required) return {RowState::needs_reboot, "not measured"};
  return {};
}

std::string StackDriver::current_launch_config() const {
  // Steps 7 and 8 write the same file by default; either may be alone.
  for (const auto& path : {s_.profile.spec.launch_config, s_.profile.weights.launch_config}) {
    auto text = s_.sys.read(path);
    if (text) return *text;
  }
  return "";
}

EngineLaunch StackDriver::launch_for(const StepRef& step) const {
  const bool speculative =
      step.drafts && std::find(applied_.begin(), applied_.end(), step.step) != applied_.end();
  return engine_launch(s_, current_launch_config(), o_, speculative, work_dir_);
}

Sample StackDriver::measure(const StepRef& step) {
  auto l = launch_for(step);
  std::vector<std::string> argv{
      o_.engine.string(),        "generate", "--json", "--prompt", o_.prompt, "-n",
      std::to_string(o_.tokens), "--temp",   "0"};
  argv.insert(argv.end(), l.args.begin(), l.args.end());
  auto r = run_process(argv);
  if (r.exit_code != 0)
    throw EngineError(fmt::format("the engine failed on step {} (exit {}): {}", step.name,
                                  r.exit_code, r.err.empty() ? "no message" : r.err));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(r.out);
  } catch (const nlohmann::json::exception& e) {
    throw EngineError(
        fmt::format("the engine's JSON on step {} does not parse: {}", step.name, e.what()));
  }
  Sample s = sample_from_generate_json(j, o_.block);
  if (!l.note.empty()) {
    if (s.note.empty()) s.note = l.note;
    if (std::find(notes_.begin(), notes_.end(), l.note) == notes_.end()) notes_.push_back(l.note);
  }
  return s;
}

double StackDriver::bandwidth_gbps(const StepRef& step) {
  return probe_cpus(launch_for(step).target_cpus, bw_mib_, 3);
}

}  // namespace epyctune::bench
