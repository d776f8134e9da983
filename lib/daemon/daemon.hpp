// epyctuned's life: load the config, open the stack session, apply the
// profile, tell systemd it is ready, serve the control socket, run the
// engine instances, and re-verify on an interval and on hotplug uevents until
// SIGTERM/SIGINT; SIGHUP reloads the config (a bad one keeps the running
// state). On stop: instances stopped, then the profile reverted or kept per
// revert_on_stop, never reverted while the system shuts down unless
// revert_on_shutdown. Every method below is safe from the control socket's
// thread while run() is in its loop.
#pragma once

#include <atomic>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "daemon/config.hpp"
#include "daemon/drift.hpp"
#include "daemon/metrics.hpp"
#include "daemon/supervisor.hpp"
#include "host/sysroot.hpp"
#include "stack/session.hpp"

namespace epyctune::daemon {

// An apply asked for through the socket: `epyctune apply`'s options. The
// daemon keeps one profile applied (its config's), so `profile`, when given,
// must name that one; `steps` narrows the knobs, `check` writes nothing.
struct ApplyRequest {
  std::string profile;  // "" = the configured one
  std::string steps;    // "" = every configured step
  bool check = false;
  bool keep_going = false;
  bool force = false;  // accepted: the running session already passed the profile check
};

struct DaemonOptions {
  std::string config = "/etc/epyctune/epyctune.toml";
  std::string sysroot = "/";
  std::string socket;  // "" = /run/epyctune/epyctuned.sock beneath the sysroot
  std::string engine;  // the engine binary when the config names none
};

class Daemon {
 public:
  explicit Daemon(DaemonOptions o);
  ~Daemon();

  // The whole life; returns the process exit code.
  int run();

  nlohmann::json status();
  nlohmann::json plan();
  nlohmann::json verify(Trigger trigger);
  // The apply result, whatever its exit code (a failed knob is in the result).
  nlohmann::json apply(const ApplyRequest& req = {});
  nlohmann::json revert();
  // Throws ConfigError (the running state is kept) or std::runtime_error.
  nlohmann::json reload();
  // name "" = every instance. Throws std::invalid_argument for an unknown name.
  nlohmann::json engine_status(const std::string& name);
  nlohmann::json engine_start(const std::string& name);
  nlohmann::json engine_stop(const std::string& name);

 private:
  struct Loaded;  // a config with its session and carved instances
  std::unique_ptr<Loaded> load(Trigger trigger);
  void commit(std::unique_ptr<Loaded> next, bool apply_now);
  // Every configured knob, or `knobs` with `opts` (a socket apply).
  stack::ApplyResult apply_locked();
  stack::ApplyResult apply_locked(const std::vector<stack::Knob>& knobs, stack::ApplyOptions opts);
  void start_instances_locked();
  void stop_instances(std::vector<std::unique_ptr<Instance>> gone);
  void check_drift(Trigger trigger);
  void write_metrics_locked();
  void shutdown();
  void event_loop(int signal_fd, int interval_fd, int debounce_fd);
  std::vector<Instance*> pick(const std::string& name);
  // {"instances": [...]}: the status of `name` ("" = all); mu_ held.
  nlohmann::json instances_json_locked(const std::string& name);
  std::string resolve(const std::string& host_path) const;

  DaemonOptions o_;
  // An instance came up or went down: the event loop rewrites the metrics
  // textfile. An eventfd, because the instance's thread must not take mu_
  // (engine.stop holds it while it joins that thread). Declared before the
  // instances, so it outlives them.
  host::UniqueFd metrics_wake_;
  std::recursive_mutex mu_;
  std::unique_ptr<Loaded> cur_;
  std::vector<std::unique_ptr<Instance>> instances_;
  bool applied_ = false;  // the profile is applied (not reverted through the socket)
  std::optional<VerifyReport> last_verify_;
  std::string last_apply_error_;
  std::time_t applied_at_ = 0;
  DaemonCounters counters_;
  std::atomic<bool> timers_dirty_{true};
  std::atomic<bool> stop_requested_{false};
};

}  // namespace epyctune::daemon
