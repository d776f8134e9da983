// What the engine does with a launch plan: decide the CPUs each pool gets on
// this machine, put each thread into its side's resctrl group, and read back
// where every thread landed. A mismatch is an error, never a silent fallback.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "launch/launch_config.hpp"

namespace epyctune::launch {

// The plan as it runs on this machine: each side cut to its first
// side_threads() CPUs when all are in `allowed`. Otherwise, with `map_cpus`,
// the sides are mapped in order onto the allowed CPUs, each keeping at least
// one (a single allowed CPU is shared by both), and `reason` says what went
// where; without it, throws LaunchConfigError naming the CPUs that are
// missing and the flag that maps them.
LaunchPlan place_on(const LaunchPlan& p, const std::vector<int>& allowed, bool map_cpus);

// Appends `tid` to GROUP/tasks under `resctrl_root` (one tid per write, as
// resctrl requires). Throws LaunchConfigError naming the file and the step
// that creates the group.
void join_resctrl_group(const std::filesystem::path& resctrl_root, const std::string& group,
                        pid_t tid);

// The tids listed in GROUP/tasks (empty when the file is missing).
std::vector<pid_t> resctrl_tasks(const std::filesystem::path& resctrl_root,
                                 const std::string& group);

// Cpus_allowed_list of one of this process's threads (/proc/self/task/TID/status).
std::vector<int> thread_allowed_cpus(pid_t tid);

pid_t current_tid();

// Where one thread landed, read back after it was pinned and joined.
struct ThreadPlacement {
  Role side = Role::verify;
  pid_t tid = 0;
  int expected_cpu = -1;
  std::vector<int> allowed;  // read back from /proc
  std::string group;         // resctrl group it should be in ("" = none)
  bool in_group = false;     // tid found in the group's tasks file
  std::string error;         // non-empty: a mismatch
};

// Collects each pool thread's placement as the thread starts. Thread-safe:
// pool workers and the drafting thread call record() concurrently.
class PlacementLog {
 public:
  // Joins the group (when set), then reads back the thread's allowed CPUs
  // and the group's tasks file, and records any mismatch.
  void record(Role side, int expected_cpu, const std::filesystem::path& resctrl_root,
              const std::string& group);
  std::vector<ThreadPlacement> threads() const;
  // Every mismatch, one line each ("" when none).
  std::string errors() const;

 private:
  mutable std::mutex mu_;
  std::vector<ThreadPlacement> threads_;
};

// Memory read-back: bytes per NUMA node of a buffer against the nodes the
// plan bound it to. Returns "" when every byte is on an allowed node, else
// what is where.
std::string check_nodes(const std::string& what, const std::map<int, uint64_t>& bytes_per_node,
                        const std::vector<int>& allowed_nodes);

}  // namespace epyctune::launch
