#include "launch/engine_side.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/cpulist.hpp"

namespace epyctune::launch {

namespace {

std::vector<int> first_n(const std::vector<int>& v, int n) {
  return {v.begin(), v.begin() + std::min<size_t>(v.size(), static_cast<size_t>(n))};
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

LaunchPlan place_on(const LaunchPlan& p, const std::vector<int>& allowed, bool map_cpus) {
  if (!p.has_spec)
    throw LaunchConfigError(
        "the launch config has no [spec] section: it names no CPUs (apply step 8, spec)");
  LaunchPlan a = p;
  a.reason.clear();
  for (Side* s : {&a.draft, &a.verify}) {
    s->cpus = first_n(s->cpus, side_threads(*s));
    s->threads = 0;
  }
  std::vector<int> missing;
  for (const Side* s : {&a.draft, &a.verify})
    for (int c : s->cpus)
      if (!contains(allowed, c)) missing.push_back(c);
  if (missing.empty()) return a;
  if (!map_cpus)
    throw LaunchConfigError(fmt::format(
        "the launch config's CPUs {} are not ones this process may run on (allowed: {}): run "
        "on the host it was planned for, or pass --map-cpus to map the plan onto the allowed "
        "CPUs in order",
        common::format_cpulist(missing), common::format_cpulist(allowed)));
  if (allowed.empty()) throw LaunchConfigError("no CPU is allowed to this process");
  const size_t n = allowed.size();
  const std::string planned =
      fmt::format("draft {} + verify {}", common::format_cpulist(a.draft.cpus),
                  common::format_cpulist(a.verify.cpus));
  if (n == 1) {
    a.draft.cpus = a.verify.cpus = allowed;
  } else {
    // Each side keeps its share of the allowed CPUs, at least one each.
    const double nd = double(a.draft.cpus.size());
    const double share = nd / (nd + double(a.verify.cpus.size()));
    size_t kd = static_cast<size_t>(std::lround(share * double(n)));
    kd = std::clamp<size_t>(kd, 1, n - 1);
    a.verify.cpus.assign(allowed.begin() + static_cast<long>(kd), allowed.end());
    a.draft.cpus.assign(allowed.begin(), allowed.begin() + static_cast<long>(kd));
  }
  a.reason = fmt::format(
      "planned CPUs {} are not all online here (missing {}); mapped in order onto draft {} + "
      "verify {}{}",
      planned, common::format_cpulist(missing), common::format_cpulist(a.draft.cpus),
      common::format_cpulist(a.verify.cpus), n == 1 ? " (one CPU: both sides share it)" : "");
  return a;
}

void join_resctrl_group(const std::filesystem::path& resctrl_root, const std::string& group,
                        pid_t tid) {
  const auto path = resctrl_root / group / "tasks";
  // O_CREAT only matters on a fixture (a plain directory); resctrl makes the
  // file with the group, and a missing group fails with ENOENT either way.
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw LaunchConfigError(
        fmt::format("{}: cannot open to join resctrl group '{}': {} (the group is made by step 4: "
                    "`epyctune apply --steps cat`)",
                    path.string(), group, std::strerror(errno)));
  const std::string line = std::to_string(tid) + "\n";
  ssize_t w = ::write(fd, line.data(), line.size());
  int err = errno;
  ::close(fd);
  if (w != static_cast<ssize_t>(line.size()))
    throw LaunchConfigError(
        fmt::format("{}: writing thread {} failed: {}", path.string(), tid, std::strerror(err)));
}

std::vector<pid_t> resctrl_tasks(const std::filesystem::path& resctrl_root,
                                 const std::string& group) {
  std::ifstream f(resctrl_root / group / "tasks");
  std::vector<pid_t> out;
  long t;
  while (f >> t) out.push_back(static_cast<pid_t>(t));
  return out;
}

std::vector<int> thread_allowed_cpus(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Cpus_allowed_list:", 0) == 0)
      return common::parse_cpulist(line.substr(line.find(':') + 1));
  return {};
}

pid_t current_tid() {
  return static_cast<pid_t>(::syscall(SYS_gettid));
}

void PlacementLog::record(Role side, int expected_cpu, const std::filesystem::path& resctrl_root,
                          const std::string& group) {
  ThreadPlacement t;
  t.side = side;
  t.tid = current_tid();
  t.expected_cpu = expected_cpu;
  t.group = group;
  std::string err;
  if (!group.empty()) {
    try {
      join_resctrl_group(resctrl_root, group, t.tid);
    } catch (const LaunchConfigError& e) {
      err = e.what();
    }
    auto tasks = resctrl_tasks(resctrl_root, group);
    t.in_group = std::find(tasks.begin(), tasks.end(), t.tid) != tasks.end();
    if (err.empty() && !t.in_group)
      err = fmt::format("thread {} is not listed in {} after joining", t.tid,
                        (resctrl_root / group / "tasks").string());
  }
  t.allowed = thread_allowed_cpus(t.tid);
  if (expected_cpu >= 0 && t.allowed != std::vector<int>{expected_cpu}) {
    if (!err.empty()) err += "; ";
    err += fmt::format("thread {} ({}) may run on CPUs {}, the plan pins it to {}", t.tid,
                       role_name(side), common::format_cpulist(t.allowed), expected_cpu);
  }
  t.error = err;
  std::lock_guard lk(mu_);
  threads_.push_back(std::move(t));
}

std::vector<ThreadPlacement> PlacementLog::threads() const {
  std::lock_guard lk(mu_);
  return threads_;
}

std::string PlacementLog::errors() const {
  std::lock_guard lk(mu_);
  std::string out;
  for (const auto& t : threads_)
    if (!t.error.empty()) out += (out.empty() ? "" : "\n") + t.error;
  return out;
}

std::string check_nodes(const std::string& what, const std::map<int, uint64_t>& bytes_per_node,
                        const std::vector<int>& allowed_nodes) {
  if (allowed_nodes.empty()) return "";
  std::string bad;
  for (auto [node, bytes] : bytes_per_node)
    if (bytes > 0 && !contains(allowed_nodes, node))
      bad += fmt::format("{}node{} {:.1f} MiB", bad.empty() ? "" : ", ", node, bytes / 1048576.0);
  if (bad.empty()) return "";
  return fmt::format("{}: pages on {}, outside the plan's nodes {}", what, bad,
                     common::format_cpulist(allowed_nodes));
}

}  // namespace epyctune::launch
