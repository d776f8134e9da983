#include "daemon/daemon.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "common/cpulist.hpp"
#include "control/server.hpp"
#include "daemon/daemon_state.hpp"
#include "daemon/handler.hpp"
#include "daemon/system.hpp"
#include "daemon/uevents.hpp"
#include "launch/from_profile.hpp"
#include "stack/revert.hpp"

namespace epyctune::daemon {

namespace {

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

void arm(int fd, int ms, bool periodic) {
  itimerspec t{};
  t.it_value.tv_sec = ms / 1000;
  t.it_value.tv_nsec = static_cast<long>(ms % 1000) * 1000000L;
  if (ms > 0 && t.it_value.tv_sec == 0 && t.it_value.tv_nsec == 0) t.it_value.tv_nsec = 1;
  if (periodic) t.it_interval = t.it_value;
  ::timerfd_settime(fd, 0, &t, nullptr);
}

void drain_fd(int fd) {
  uint64_t buf[16];
  while (::read(fd, buf, sizeof buf) > 0) {
  }
}

}  // namespace

Daemon::Daemon(DaemonOptions o)
    : o_(std::move(o)), metrics_wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

Daemon::~Daemon() = default;

std::string Daemon::resolve(const std::string& host_path) const {
  return host::Sysroot(o_.sysroot).resolve(host_path).string();
}

std::unique_ptr<Daemon::Loaded> Daemon::load(Trigger trigger) {
  auto l = std::make_unique<Loaded>();
  l->cfg = load_config(o_.config);
  try {
    l->session = stack::open_session({o_.sysroot, "", l->cfg.profile, l->cfg.steps, l->cfg.force});
  } catch (const std::exception& e) {
    throw ConfigError(
        fmt::format("{}: profile \"{}\": {}", l->cfg.source, l->cfg.profile, e.what()));
  }
  l->plan = launch::plan_from_profile(l->session.profile, l->session.part);
  l->instances = carve_instances(l->cfg, l->plan, l->session.topo);
  if (l->cfg.engine.map_cpus) map_onto_host(l->instances, allowed_cpus(), l->cfg.source);
  for (const auto& i : l->instances)
    if (i.plan.draft.cpus == i.plan.verify.cpus || i.plan.verify.cpus.empty())
      throw ConfigError(fmt::format(
          "{}:{}: [[instance]] {}: its partition has a single CPU ({}), too small for the launch "
          "config's two sides: give it at least two CPUs",
          l->cfg.source, i.cfg.line, i.cfg.name, common::format_cpulist(i.cpus)));
  spdlog::info("{}: config {}: profile {}, {} knob(s) in {} step(s), {} instance(s)",
               trigger_name(trigger), l->cfg.source, l->session.profile.name,
               l->session.knobs.size(), l->session.steps.size(), l->instances.size());
  return l;
}

stack::ApplyResult Daemon::apply_locked() {
  stack::ApplyOptions opts;
  opts.profile = cur_->session.profile.name;
  return apply_locked(cur_->session.knobs, opts);
}

stack::ApplyResult Daemon::apply_locked(const std::vector<stack::Knob>& knobs,
                                        stack::ApplyOptions opts) {
  if (opts.check) return stack::apply_knobs(cur_->session.sys, knobs, opts);
  notify("STATUS=applying profile " + cur_->session.profile.name);
  auto r = stack::apply_knobs(cur_->session.sys, knobs, opts);
  int changed = 0;
  for (const auto& k : r.knobs)
    if (k.status == stack::KnobStatus::Applied) {
      ++changed;
      spdlog::debug("apply: {} {}: {} -> {}", k.step, k.name, k.before, k.after);
    }
  for (const auto& n : r.notes) spdlog::warn("apply: {}", n);
  if (r.exit_code == stack::kExitOk) {
    applied_ = true;
    applied_at_ = std::time(nullptr);
    last_apply_error_.clear();
    spdlog::info("apply: profile {}: {} knob(s) changed, reboot required {}",
                 cur_->session.profile.name, changed, r.reboot_required);
  } else {
    last_apply_error_ = r.error;
    spdlog::error("apply: profile {} failed (exit code {}): {}", cur_->session.profile.name,
                  r.exit_code, r.error);
  }
  return r;
}

void Daemon::start_instances_locked() {
  host::Sysroot sys(o_.sysroot);
  const std::string engine = cur_->cfg.engine.binary.empty() ? o_.engine : cur_->cfg.engine.binary;
  for (const auto& ip : cur_->instances) {
    bool running = false;
    for (const auto& i : instances_) running = running || i->plan().cfg.name == ip.cfg.name;
    if (running) continue;
    sys.make_dirs(kInstanceDir);
    SupervisorOptions so;
    so.engine = engine;
    so.resctrl_root = resolve("/sys/fs/resctrl");
    so.launch_config_file = resolve(ip.launch_config);
    so.engine_cfg = cur_->cfg.engine;
    so.on_state_change = [fd = metrics_wake_.get()] {
      const uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(fd, &one, sizeof one);
    };
    write_atomic(so.launch_config_file, launch_config_text(ip), 0644);
    instances_.push_back(std::make_unique<Instance>(ip, so));
    instances_.back()->start();
  }
}

void Daemon::stop_instances(std::vector<std::unique_ptr<Instance>> gone) {
  // SIGTERM to all first, so their stop timeouts run side by side.
  std::vector<std::thread> stoppers;
  for (auto& i : gone) stoppers.emplace_back([p = i.get()] { p->stop(); });
  for (auto& t : stoppers) t.join();
  host::Sysroot sys(o_.sysroot);
  for (auto& i : gone) {
    try {
      sys.remove_file(i->plan().launch_config);
    } catch (const std::exception&) {
      // already gone
    }
  }
}

// An instance keeps running across a reload when nothing that reaches the
// engine changed: its argv, its launch config and the CPUs it is confined to.
static bool same_instance(const Instance& i, const InstancePlan& p, const EngineProcessConfig& e,
                          const std::string& engine) {
  SupervisorOptions o = i.options();
  SupervisorOptions n = o;
  n.engine = engine;
  n.engine_cfg = e;
  return serve_argv(i.plan(), o) == serve_argv(p, n) &&
         launch_config_text(i.plan()) == launch_config_text(p) &&
         i.plan().host_cpus == p.host_cpus && i.plan().cpus == p.cpus && o.engine_cfg == e;
}

void Daemon::commit(std::unique_ptr<Loaded> next, bool apply_now) {
  std::vector<std::unique_ptr<Instance>> gone;
  {
    std::lock_guard lk(mu_);
    const std::string engine =
        next->cfg.engine.binary.empty() ? o_.engine : next->cfg.engine.binary;
    std::vector<std::unique_ptr<Instance>> keep;
    for (auto& i : instances_) {
      const InstancePlan* p = nullptr;
      for (const auto& n : next->instances)
        if (n.cfg.name == i->plan().cfg.name) p = &n;
      if (p && same_instance(*i, *p, next->cfg.engine, engine))
        keep.push_back(std::move(i));
      else
        gone.push_back(std::move(i));
    }
    instances_ = std::move(keep);
    cur_ = std::move(next);
    if (apply_now) apply_locked();
    timers_dirty_ = true;
  }
  for (const auto& g : gone) spdlog::info("reload: stopping instance {}", g->plan().cfg.name);
  stop_instances(std::move(gone));
  std::lock_guard lk(mu_);
  start_instances_locked();
}

nlohmann::json Daemon::reload() {
  notify("RELOADING=1");
  std::unique_ptr<Loaded> next;
  try {
    next = load(Trigger::reload);
  } catch (const std::exception& e) {
    {
      std::lock_guard lk(mu_);
      ++counters_.reload_failures;
      write_metrics_locked();
    }
    spdlog::error("reload: {}; keeping the running configuration", e.what());
    notify("READY=1\nSTATUS=reload refused: bad config, running as before");
    throw ConfigError(std::string(e.what()) + " (the running configuration is kept)");
  }
  bool reapply;
  {
    std::lock_guard lk(mu_);
    const auto& c = cur_->cfg;
    reapply = applied_ && (c.profile != next->cfg.profile || c.steps != next->cfg.steps ||
                           c.force != next->cfg.force);
  }
  commit(std::move(next), reapply);
  {
    std::lock_guard lk(mu_);
    ++counters_.reloads;
  }
  check_drift(Trigger::reload);
  notify("READY=1\nSTATUS=reloaded " + o_.config);
  return status();
}

void Daemon::shutdown() {
  notify("STOPPING=1\nSTATUS=stopping engine instances");
  std::vector<std::unique_ptr<Instance>> all;
  {
    std::lock_guard lk(mu_);
    all = std::move(instances_);
    instances_.clear();
  }
  stop_instances(std::move(all));
  std::lock_guard lk(mu_);
  const auto& c = cur_->cfg;
  if (!c.revert_on_stop) {
    spdlog::info("stop: keeping the applied profile (revert_on_stop = false)");
    return;
  }
  if (system_shutting_down() && !c.revert_on_shutdown) {
    spdlog::info(
        "stop: the system is shutting down: keeping the applied profile "
        "(revert_on_shutdown = false)");
    return;
  }
  notify("STATUS=reverting");
  auto r = stack::revert_journal(cur_->session.sys);
  if (r.exit_code == stack::kExitOk)
    spdlog::info("stop: reverted {} knob(s)", r.knobs.size());
  else
    spdlog::error("stop: revert failed (exit code {}): {}", r.exit_code, r.error);
  applied_ = false;
}

// Signals, the verify interval, hotplug uevents (debounced), until SIGTERM/SIGINT.
void Daemon::event_loop(int sfd, int interval, int debounce) {
  std::unique_ptr<UeventSocket> uevents;
  while (!stop_requested_) {
    if (timers_dirty_.exchange(false)) {
      std::lock_guard lk(mu_);
      arm(interval, cur_->cfg.drift.interval_s * 1000, true);
      if (cur_->cfg.drift.uevents && !uevents) {
        uevents = std::make_unique<UeventSocket>();
        if (uevents->fd() < 0)
          spdlog::warn("uevents: {}: hotplug will be noticed at the next interval",
                       uevents->error());
      } else if (!cur_->cfg.drift.uevents) {
        uevents.reset();
      }
    }
    pollfd fds[5] = {{sfd, POLLIN, 0},
                     {interval, POLLIN, 0},
                     {debounce, POLLIN, 0},
                     {uevents ? uevents->fd() : -1, POLLIN, 0},
                     {metrics_wake_.get(), POLLIN, 0}};
    if (::poll(fds, 5, 500) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sfd, &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGHUP) {
          spdlog::info("SIGHUP: reloading {}", o_.config);
          try {
            reload();
          } catch (const std::exception&) {
            // logged by reload()
          }
        } else {
          spdlog::info("{}: stopping", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
          stop_requested_ = true;
        }
      }
    }
    if (stop_requested_) break;
    if (fds[1].revents & POLLIN) {
      drain_fd(interval);
      check_drift(Trigger::interval);
    }
    if (fds[3].revents & POLLIN) {
      std::string what;
      if (uevents->drain(&what)) {
        spdlog::info("uevent {}: re-verifying in {} ms", what, cur_->cfg.drift.debounce_ms);
        arm(debounce, std::max(1, cur_->cfg.drift.debounce_ms), false);
      }
    }
    if (fds[2].revents & POLLIN) {
      drain_fd(debounce);
      check_drift(Trigger::uevent);
    }
    if (fds[4].revents & POLLIN) {
      drain_fd(metrics_wake_.get());
      std::lock_guard lk(mu_);
      write_metrics_locked();
    }
  }
}

int Daemon::run() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGHUP, SIGTERM, SIGINT}) sigaddset(&mask, s);
  // Blocked before any thread starts, so every thread inherits the mask and
  // the signals arrive only through the signalfd.
  ::pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  host::UniqueFd sfd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  host::UniqueFd interval(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  host::UniqueFd debounce(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!sfd || !interval || !debounce) {
    spdlog::critical("signalfd/timerfd: {}", std::strerror(errno));
    return 1;
  }
  try {
    auto first = load(Trigger::start);
    std::lock_guard lk(mu_);
    cur_ = std::move(first);
    if (cur_->cfg.apply_on_start) {
      auto r = apply_locked();
      if (r.exit_code != stack::kExitOk) {
        notify("STATUS=apply failed: " + r.error);
        return r.exit_code;
      }
    }
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    notify(std::string("STATUS=cannot start: ") + e.what());
    return 1;
  }
  std::unique_ptr<control::Server> server;
  try {
    control::ServerOptions so;
    so.path = o_.socket.empty() ? resolve(std::string(control::kSocketPath)) : o_.socket;
    server = std::make_unique<control::Server>(so, make_handler(*this));
    server->start();
    spdlog::info("control socket {}", server->path());
  } catch (const std::exception& e) {
    spdlog::critical("control socket: {}", e.what());
    shutdown();
    return 1;
  }
  {
    std::lock_guard lk(mu_);
    start_instances_locked();
  }
  check_drift(Trigger::start);
  notify(fmt::format("READY=1\nSTATUS=profile {} applied, {} instance(s)",
                     cur_->session.profile.name, cur_->instances.size()));
  spdlog::info("ready");

  event_loop(sfd.get(), interval.get(), debounce.get());
  server->stop();
  shutdown();
  notify("STATUS=stopped");
  spdlog::info("stopped");
  return 0;
}

}  // namespace epyctune::daemon
