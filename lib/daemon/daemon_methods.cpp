// The daemon's requests (control socket and timers): status, plan, verify,
// apply, revert and the engine instances. The lifecycle is in daemon.cpp.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "common/version.hpp"
#include "control/protocol.hpp"
#include "daemon/daemon.hpp"
#include "daemon/daemon_state.hpp"
#include "daemon/health.hpp"
#include "daemon/system.hpp"
#include "launch/from_profile.hpp"
#include "stack/applied.hpp"
#include "stack/plan_report.hpp"
#include "stack/revert.hpp"
#include "stack/steps.hpp"

namespace epyctune::daemon {

// How long engine.status waits for each running instance's /health.
constexpr int kServingTimeoutMs = 500;

void Daemon::write_metrics_locked() {
  const std::string& path = cur_->cfg.metrics_textfile;
  if (path.empty()) return;
  std::vector<InstanceMetrics> inst;
  for (const auto& i : instances_) inst.push_back({i->plan().cfg.name, i->up(), i->restarts()});
  const size_t drifted_now =
      last_verify_ && !last_verify_->repaired ? last_verify_->drifted.size() : 0;
  const std::string text = render_metrics(last_verify_ ? &last_verify_->checklist : nullptr,
                                          drifted_now, counters_, inst);
  try {
    host::Sysroot sys(o_.sysroot);
    std::filesystem::path p(path);
    sys.make_dirs(p.parent_path().string());
    write_atomic(resolve(path), text, 0644);
  } catch (const std::exception& e) {
    spdlog::error("metrics: cannot write {}: {}", resolve(path), e.what());
  }
}

void Daemon::check_drift(Trigger trigger) {
  std::lock_guard lk(mu_);
  if (!cur_) return;
  auto r = verify_session(cur_->session, trigger);
  ++counters_.verifies;
  if (!r.drifted.empty()) {
    ++counters_.drift_events;
    counters_.drifted_knobs += r.drifted.size();
    for (const auto& d : r.drifted)
      spdlog::warn("drift ({}): {} {}: {} (profile wants {})", trigger_name(trigger), d.step,
                   d.name, d.current, d.desired);
    if (cur_->cfg.drift.repair && applied_) {
      repair_drift(cur_->session, r);
      counters_.repairs += r.repairs.size();
      if (!r.repaired) ++counters_.repair_failures;
    }
  } else {
    spdlog::debug("verify ({}): {} passed, {} failed, {} skipped", trigger_name(trigger),
                  r.checklist.passed, r.checklist.failed, r.checklist.skipped);
  }
  notify(fmt::format("STATUS=profile {} {}; last verify: {} drifted{}", cur_->session.profile.name,
                     applied_ ? "applied" : "not applied", r.drifted.size(),
                     r.repaired ? ", repaired" : ""));
  last_verify_ = std::move(r);
  write_metrics_locked();
}

nlohmann::json Daemon::status() {
  std::lock_guard lk(mu_);
  nlohmann::json inst = nlohmann::json::array();
  for (const auto& i : instances_) inst.push_back(i->status());
  nlohmann::json journal;
  try {
    auto st = stack::read_applied_state(cur_->session.sys);
    journal = {{"applied", st.applied},
               {"profile", st.profile},
               {"knobs", st.knobs},
               {"path", st.journal_path}};
  } catch (const std::exception& e) {
    journal = {{"error", e.what()}};
  }
  const auto& c = cur_->cfg;
  return {{"version", std::string(kVersion)},
          {"pid", ::getpid()},
          {"config", o_.config},
          {"sysroot", o_.sysroot},
          {"profile", cur_->session.profile.name},
          {"steps", cur_->session.steps},
          {"applied", applied_},
          {"applied_at", applied_at_},
          {"apply_error", last_apply_error_},
          {"journal", journal},
          {"revert_on_stop", c.revert_on_stop},
          {"revert_on_shutdown", c.revert_on_shutdown},
          {"drift",
           {{"interval_s", c.drift.interval_s},
            {"repair", c.drift.repair},
            {"uevents", c.drift.uevents},
            {"debounce_ms", c.drift.debounce_ms}}},
          {"last_verify", last_verify_ ? to_json(*last_verify_) : nlohmann::json()},
          {"counters",
           {{"verifies", counters_.verifies},
            {"drift_events", counters_.drift_events},
            {"drifted_knobs", counters_.drifted_knobs},
            {"repairs", counters_.repairs},
            {"repair_failures", counters_.repair_failures},
            {"reloads", counters_.reloads},
            {"reload_failures", counters_.reload_failures}}},
          {"metrics_textfile", c.metrics_textfile.empty() ? "" : resolve(c.metrics_textfile)},
          {"launch_plan", launch::to_json(cur_->plan)},
          {"instances", inst}};
}

nlohmann::json Daemon::plan() {
  std::lock_guard lk(mu_);
  auto j =
      stack::plan_to_json(cur_->session, stack::plan_knobs(cur_->session.sys, cur_->session.knobs));
  j["launch_plan"] = launch::to_json(cur_->plan);
  return j;
}

nlohmann::json Daemon::verify(Trigger trigger) {
  check_drift(trigger);
  std::lock_guard lk(mu_);
  return to_json(*last_verify_);
}

namespace {

// The request names the profile the daemon runs: its config's string, the
// profile's name, or the same file.
bool same_profile(const std::string& asked, const std::string& configured,
                  const std::string& name) {
  if (asked == configured || asked == name) return true;
  std::error_code ec;
  return std::filesystem::equivalent(asked, configured, ec) && !ec;
}

}  // namespace

nlohmann::json Daemon::apply(const ApplyRequest& req) {
  std::lock_guard lk(mu_);
  const auto& s = cur_->session;
  if (!req.profile.empty() && !same_profile(req.profile, cur_->cfg.profile, s.profile.name))
    throw control::ProtocolError(
        control::code::invalid_request,
        fmt::format("epyctuned keeps profile {} applied ({}): to change it, set `profile` there "
                    "and reload (systemctl reload epyctuned); `epyctune apply --direct` applies "
                    "{} without the daemon, whose drift repair will then put back what differs",
                    s.profile.name, cur_->cfg.source, req.profile));
  std::vector<stack::Knob> knobs;
  if (req.steps.empty()) {
    knobs = s.knobs;
  } else {
    std::vector<int> asked;
    try {
      asked = stack::parse_steps(req.steps);
    } catch (const std::exception& e) {
      throw control::ProtocolError(control::code::invalid_request,
                                   std::string("apply: steps: ") + e.what());
    }
    std::vector<std::string> names;
    for (const auto& st : stack::all_steps())
      if (std::find(asked.begin(), asked.end(), st.number) != asked.end()) names.push_back(st.name);
    for (const auto& k : s.knobs)
      if (std::find(names.begin(), names.end(), k.step) != names.end()) knobs.push_back(k);
  }
  stack::ApplyOptions opts;
  opts.profile = s.profile.name;
  opts.check = req.check;
  opts.keep_going = req.keep_going;
  return stack::to_json(apply_locked(knobs, opts));
}

nlohmann::json Daemon::revert() {
  std::lock_guard lk(mu_);
  notify("STATUS=reverting");
  auto r = stack::revert_journal(cur_->session.sys);
  if (r.exit_code != stack::kExitOk) throw std::runtime_error("revert failed: " + r.error);
  applied_ = false;
  spdlog::info("revert: {} knob(s) restored; drift is reported but not repaired until apply",
               r.knobs.size());
  notify("STATUS=profile " + cur_->session.profile.name + " reverted");
  return stack::to_json(r);
}

std::vector<Instance*> Daemon::pick(const std::string& name) {
  std::vector<Instance*> out;
  for (const auto& i : instances_)
    if (name.empty() || i->plan().cfg.name == name) out.push_back(i.get());
  if (!name.empty() && out.empty()) {
    std::string names;
    for (const auto& i : instances_) names += (names.empty() ? "" : ", ") + i->plan().cfg.name;
    throw control::ProtocolError(control::code::invalid_request,
                                 fmt::format("no instance named \"{}\" (instances: {})", name,
                                             names.empty() ? "none configured" : names));
  }
  return out;
}

nlohmann::json Daemon::instances_json_locked(const std::string& name) {
  nlohmann::json out = nlohmann::json::array();
  for (auto* i : pick(name)) out.push_back(i->status());
  return {{"instances", out}};
}

nlohmann::json Daemon::engine_status(const std::string& name) {
  nlohmann::json out;
  {
    std::lock_guard lk(mu_);
    out = instances_json_locked(name);
  }
  // Outside the lock: an engine slow to answer holds up this reply only.
  add_serving_load(out, kServingTimeoutMs);
  return out;
}

nlohmann::json Daemon::engine_start(const std::string& name) {
  std::lock_guard lk(mu_);
  for (auto* i : pick(name)) {
    spdlog::info("instance {}: start requested", i->plan().cfg.name);
    i->start();
  }
  return instances_json_locked(name);
}

nlohmann::json Daemon::engine_stop(const std::string& name) {
  std::lock_guard lk(mu_);
  for (auto* i : pick(name)) {
    spdlog::info("instance {}: stop requested", i->plan().cfg.name);
    i->stop();
  }
  return instances_json_locked(name);
}

}  // namespace epyctune::daemon
