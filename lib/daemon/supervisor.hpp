// One engine instance under supervision: `epyctune-engine serve` started with
// the instance's launch config in its own process group, confined to its own
// CPUs before exec, declared up once it printed its ready line and /health
// answers, restarted with exponential backoff when it crashes (bounded: after
// max_restarts crashes in a row it is left failed; a stable run starts the
// count over), and stopped with SIGTERM, then SIGKILL after a timeout.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "daemon/config.hpp"
#include "daemon/instances.hpp"

namespace epyctune::daemon {

struct SupervisorOptions {
  std::string engine;              // the epyctune-engine binary
  std::string resctrl_root;        // where the plan's resctrl groups live (beneath the sysroot)
  std::string launch_config_file;  // the instance's launch config, on this machine
  EngineProcessConfig engine_cfg;
  // Called (from the supervising thread, with no lock held) when the
  // instance comes up, goes down or changes state otherwise: the daemon
  // rewrites its metrics textfile then, not at the next verify. It must not
  // block on anything that waits for this instance (stop() joins the thread).
  std::function<void()> on_state_change;
};

// The argv that starts one instance (argv[0] = the engine binary).
std::vector<std::string> serve_argv(const InstancePlan& p, const SupervisorOptions& o);

// Where one thread of an instance landed, read from /proc and resctrl.
struct ThreadLanding {
  pid_t tid = 0;
  std::string comm;
  std::vector<int> cpus;      // Cpus_allowed_list
  std::string resctrl_group;  // "" = in none of the plan's groups
};
std::vector<ThreadLanding> thread_landings(pid_t pid, const std::string& resctrl_root,
                                           const std::vector<std::string>& groups);

class Instance {
 public:
  Instance(InstancePlan plan, SupervisorOptions opts);
  ~Instance();  // stops
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  void start();  // starts supervising (returns at once)
  void stop();   // SIGTERM, SIGKILL after stop_timeout_s; joins; idempotent

  const InstancePlan& plan() const { return plan_; }
  const SupervisorOptions& options() const { return opts_; }
  std::string state() const;
  int restarts() const;
  bool up() const;
  pid_t pid() const;
  // pid, state, restarts, url, CPUs, nodes, resctrl groups, threads, /health placement.
  nlohmann::json status() const;

 private:
  void supervise();
  bool run_once();  // one engine lifetime; false when it should not be restarted
  pid_t spawn(int& out_fd);
  void terminate(pid_t pid);
  bool wait_exit(pid_t pid, std::chrono::milliseconds timeout, int& status);
  void set_state(const std::string& s);
  void report_state_change() const;  // on_state_change, if any; mu_ not held

  InstancePlan plan_;
  SupervisorOptions opts_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string state_ = "stopped";
  std::string last_error_;
  std::string url_;
  nlohmann::json placement_;
  pid_t pid_ = 0;
  int restarts_ = 0;
  int crashes_in_row_ = 0;
  std::chrono::steady_clock::time_point up_since_{};
  std::thread thread_;
};

}  // namespace epyctune::daemon
