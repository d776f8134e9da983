// The node_exporter textfile the daemon writes after each verify: the same
// checklist metrics as `epyctune verify --format prometheus`, then the
// daemon's own (build, drift events, repairs, instance restarts, instance up).
// Written after each verify and whenever an instance comes up or goes down.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stack/checklist.hpp"

namespace epyctune::daemon {

struct DaemonCounters {
  uint64_t verifies = 0;
  uint64_t drift_events = 0;   // verifies that found at least one knob drifted
  uint64_t drifted_knobs = 0;  // knobs found drifted, summed over verifies
  uint64_t repairs = 0;        // knobs re-applied by drift repair
  uint64_t repair_failures = 0;
  uint64_t reloads = 0;
  uint64_t reload_failures = 0;
};

struct InstanceMetrics {
  std::string name;
  bool up = false;
  int restarts = 0;
};

std::string render_metrics(const stack::Checklist* last, size_t drifted_now,
                           const DaemonCounters& c, const std::vector<InstanceMetrics>& inst);

}  // namespace epyctune::daemon
