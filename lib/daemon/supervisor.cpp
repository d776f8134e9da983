#include "daemon/supervisor.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/cpulist.hpp"
#include "daemon/health.hpp"
#include "launch/engine_side.hpp"

namespace epyctune::daemon {

namespace fs = std::filesystem;
using namespace std::chrono;

std::vector<std::string> serve_argv(const InstancePlan& p, const SupervisorOptions& o) {
  std::vector<std::string> a{o.engine, "serve", "-m", p.cfg.model};
  if (!p.cfg.draft.empty()) a.insert(a.end(), {"-md", p.cfg.draft});
  a.insert(a.end(), {"--host", p.cfg.host, "--port", std::to_string(p.cfg.port)});
  if (p.cfg.queue > 0) a.insert(a.end(), {"--queue", std::to_string(p.cfg.queue)});
  if (p.cfg.parallel > 0) a.insert(a.end(), {"--parallel", std::to_string(p.cfg.parallel)});
  if (!p.cfg.kv_budget.empty()) a.insert(a.end(), {"--kv-budget", p.cfg.kv_budget});
  a.insert(a.end(), {"--launch-config", o.launch_config_file, "--resctrl-root", o.resctrl_root});
  if (o.engine_cfg.map_cpus) a.push_back("--map-cpus");
  if (!o.engine_cfg.shared_weights.empty())
    a.insert(a.end(), {"--shared-weights", o.engine_cfg.shared_weights});
  return a;
}

std::vector<ThreadLanding> thread_landings(pid_t pid, const std::string& resctrl_root,
                                           const std::vector<std::string>& groups) {
  std::vector<ThreadLanding> out;
  std::map<pid_t, std::string> group_of;
  for (const auto& g : groups)
    if (!g.empty())
      for (pid_t t : launch::resctrl_tasks(resctrl_root, g)) group_of[t] = g;
  std::error_code ec;
  const fs::path task_dir = fs::path("/proc") / std::to_string(pid) / "task";
  for (const auto& e : fs::directory_iterator(task_dir, ec)) {
    ThreadLanding t;
    t.tid = static_cast<pid_t>(std::atol(e.path().filename().c_str()));
    std::ifstream status(e.path() / "status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        try {
          t.cpus = common::parse_cpulist(line.substr(line.find(':') + 1));
        } catch (const std::invalid_argument&) {
        }
      }
    std::ifstream comm(e.path() / "comm");
    std::getline(comm, t.comm);
    if (auto it = group_of.find(t.tid); it != group_of.end()) t.resctrl_group = it->second;
    if (t.tid > 0) out.push_back(std::move(t));
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.tid < b.tid; });
  return out;
}

Instance::Instance(InstancePlan plan, SupervisorOptions opts)
    : plan_(std::move(plan)), opts_(std::move(opts)) {}

Instance::~Instance() {
  stop();
}

void Instance::start() {
  std::unique_lock lk(mu_);
  if (thread_.joinable()) {
    if (state_ != "failed") return;
    lk.unlock();
    thread_.join();  // a failed instance's thread has returned
    lk.lock();
  }
  stop_ = false;
  crashes_in_row_ = 0;
  thread_ = std::thread([this] { supervise(); });
}

void Instance::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Instance::set_state(const std::string& s) {
  std::lock_guard lk(mu_);
  state_ = s;
}

std::string Instance::state() const {
  std::lock_guard lk(mu_);
  return state_;
}
int Instance::restarts() const {
  std::lock_guard lk(mu_);
  return restarts_;
}
bool Instance::up() const {
  std::lock_guard lk(mu_);
  return state_ == "running";
}
pid_t Instance::pid() const {
  std::lock_guard lk(mu_);
  return pid_;
}

pid_t Instance::spawn(int& out_fd) {
  const auto argv = serve_argv(plan_, opts_);
  std::vector<char*> cargv;
  for (const auto& s : argv) cargv.push_back(const_cast<char*>(s.c_str()));
  cargv.push_back(nullptr);
  const std::vector<int>& confine = plan_.host_cpus.empty() ? plan_.cpus : plan_.host_cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : confine)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(p[0]);
    ::close(p[1]);
    throw std::runtime_error(std::string("fork: ") + strerror(err));
  }
  if (pid == 0) {
    // Only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(125);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(p[1], STDOUT_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    if (!confine.empty() && ::sched_setaffinity(0, sizeof set, &set) != 0) {
      const char msg[] = "epyctuned: sched_setaffinity of the instance failed\n";
      [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
      ::_exit(126);
    }
    ::execv(cargv[0], cargv.data());
    const char msg[] = "epyctuned: cannot exec the engine\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // both sides set it, so neither races the other
  ::close(p[1]);
  out_fd = p[0];
  return pid;
}

bool Instance::wait_exit(pid_t pid, milliseconds timeout, int& status) {
  const auto end = steady_clock::now() + timeout;
  while (true) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(20ms);
  }
}

void Instance::terminate(pid_t pid) {
  set_state("stopping");
  ::kill(-pid, SIGTERM);
  int status = 0;
  if (!wait_exit(pid, seconds(opts_.engine_cfg.stop_timeout_s), status)) {
    spdlog::warn("instance {}: pid {} still running {} s after SIGTERM: SIGKILL", plan_.cfg.name,
                 pid, opts_.engine_cfg.stop_timeout_s);
    ::kill(-pid, SIGKILL);
    wait_exit(pid, seconds(5), status);
  } else if (WIFEXITED(status)) {
    spdlog::info("instance {}: pid {} stopped, exit code {}", plan_.cfg.name, pid,
                 WEXITSTATUS(status));
  }
  ::kill(-pid, SIGKILL);  // whatever the engine left in its group
}

namespace {

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return fmt::format("exit code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return "ended";
}

// Complete lines read from fd so far; `partial` keeps the rest between calls.
// Returns false at end of file.
bool read_lines(int fd, std::string& partial, std::vector<std::string>& lines) {
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n == 0) return false;
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  partial.append(buf, static_cast<size_t>(n));
  size_t nl;
  while ((nl = partial.find('\n')) != std::string::npos) {
    lines.push_back(partial.substr(0, nl));
    partial.erase(0, nl + 1);
  }
  if (partial.size() > 65536) partial.clear();  // a runaway line is not worth keeping
  return true;
}

// The lines the engine printed within 200 ms (sleeps that long after EOF).
std::vector<std::string> pump_output(int fd, std::string& partial, bool& eof) {
  std::vector<std::string> lines;
  pollfd pfd{fd, POLLIN, 0};
  if (!eof && ::poll(&pfd, 1, 200) > 0) {
    if (!read_lines(fd, partial, lines)) eof = true;
  } else if (eof) {
    std::this_thread::sleep_for(200ms);
  }
  return lines;
}

}  // namespace

bool Instance::run_once() {
  const auto& name = plan_.cfg.name;
  int out_fd = -1;
  pid_t pid;
  try {
    pid = spawn(out_fd);
  } catch (const std::exception& e) {
    std::lock_guard lk(mu_);
    last_error_ = e.what();
    return true;
  }
  {
    std::lock_guard lk(mu_);
    pid_ = pid;
    state_ = "starting";
    url_.clear();
    placement_ = nullptr;
  }
  spdlog::info("instance {}: started pid {} on CPUs {}", name, pid,
               common::format_cpulist(plan_.host_cpus.empty() ? plan_.cpus : plan_.host_cpus));
  const auto deadline = steady_clock::now() + seconds(opts_.engine_cfg.ready_timeout_s);
  std::string host, partial;
  int port = 0;
  bool ready = false, eof = false;
  int status = 0;
  bool exited = false;
  while (true) {
    {
      std::lock_guard lk(mu_);
      if (stop_) break;
    }
    for (const auto& l : pump_output(out_fd, partial, eof)) {
      if (port == 0 && parse_ready_line(l, host, port)) {
        std::lock_guard lk(mu_);
        url_ = fmt::format("http://{}:{}", host, port);
      }
      spdlog::debug("instance {}: {}", name, l);
    }
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    if (!ready && port != 0) {
      if (auto h = get_health(host, port, 1000)) {
        ready = true;
        std::lock_guard lk(mu_);
        state_ = "running";
        up_since_ = steady_clock::now();
        placement_ = h->contains("placement") ? (*h)["placement"] : nlohmann::json();
        last_error_.clear();
        spdlog::info("instance {}: serving on {}", name, url_);
      }
      if (ready) report_state_change();
    }
    if (!ready && steady_clock::now() > deadline) {
      spdlog::error("instance {}: not ready within {} s: stopping it", name,
                    opts_.engine_cfg.ready_timeout_s);
      {
        std::lock_guard lk(mu_);
        last_error_ = fmt::format("not ready within {} s", opts_.engine_cfg.ready_timeout_s);
      }
      terminate(pid);
      ::close(out_fd);
      return true;
    }
  }
  ::close(out_fd);
  if (!exited) {
    terminate(pid);
    std::lock_guard lk(mu_);
    pid_ = 0;
    return false;
  }
  ::kill(-pid, SIGKILL);  // threads or children the engine left behind in its group
  std::lock_guard lk(mu_);
  pid_ = 0;
  last_error_ = describe_exit(status);
  if (ready && steady_clock::now() - up_since_ >= seconds(opts_.engine_cfg.restart_stable_s))
    crashes_in_row_ = 0;
  spdlog::error("instance {}: engine {} ({})", name, ready ? "crashed" : "failed to start",
                last_error_);
  return true;
}

void Instance::supervise() {
  auto delay = milliseconds(opts_.engine_cfg.restart_backoff_ms);
  while (run_once()) {
    std::unique_lock lk(mu_);
    if (stop_) break;
    if (++crashes_in_row_ > opts_.engine_cfg.max_restarts) {
      state_ = "failed";
      spdlog::error("instance {}: {} crashes in a row: left failed (engine.start restarts it)",
                    plan_.cfg.name, crashes_in_row_);
      lk.unlock();
      report_state_change();
      return;
    }
    if (crashes_in_row_ == 1) delay = milliseconds(opts_.engine_cfg.restart_backoff_ms);
    state_ = "backoff";
    spdlog::info("instance {}: restarting in {} ms", plan_.cfg.name, delay.count());
    lk.unlock();
    report_state_change();
    lk.lock();
    // The predicate sees a stop() made while the lock was released.
    if (cv_.wait_for(lk, delay, [this] { return stop_; })) break;
    ++restarts_;
    delay = std::min(delay * 2, milliseconds(opts_.engine_cfg.restart_backoff_max_ms));
  }
  {
    std::lock_guard lk(mu_);
    state_ = "stopped";
  }
  report_state_change();
}

void Instance::report_state_change() const {
  if (opts_.on_state_change) opts_.on_state_change();
}

nlohmann::json Instance::status() const {
  std::lock_guard lk(mu_);
  const auto& p = plan_.plan;
  nlohmann::json j = {
      {"name", plan_.cfg.name},
      {"state", state_},
      {"pid", pid_ > 0 ? nlohmann::json(pid_) : nlohmann::json()},
      {"restarts", restarts_},
      {"url", url_},
      {"model", plan_.cfg.model},
      {"draft", plan_.cfg.draft},
      {"cpus", common::format_cpulist(plan_.cpus)},
      {"verify_cpus", common::format_cpulist(p.verify.cpus)},
      {"draft_cpus", plan_.cfg.draft.empty() ? "" : common::format_cpulist(p.draft.cpus)},
      {"host_cpus", common::format_cpulist(plan_.host_cpus)},
      {"numa_nodes", plan_.nodes},
      {"resctrl_group", p.verify.group},
      {"draft_resctrl_group", plan_.cfg.draft.empty() ? "" : p.draft.group},
      {"launch_config", plan_.launch_config},
      {"last_error", last_error_},
      {"placement", placement_},
  };
  if (!plan_.note.empty()) j["note"] = plan_.note;
  if (pid_ > 0) {
    nlohmann::json threads = nlohmann::json::array();
    for (const auto& t : thread_landings(pid_, opts_.resctrl_root, {p.verify.group, p.draft.group}))
      threads.push_back({{"tid", t.tid},
                         {"comm", t.comm},
                         {"cpus", common::format_cpulist(t.cpus)},
                         {"resctrl_group", t.resctrl_group}});
    j["threads"] = threads;
  }
  return j;
}

}  // namespace epyctune::daemon
