// The read-bandwidth probe (engine/runtime/bandwidth) on chosen CPUs: per NUMA
// node and per L3 domain, each pinned, for `epyctune bench --bandwidth` and
// for the roofline of each benchmark row.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace epyctune::bench {

// A set of CPUs to probe, named for the report ("node 0", "L3 3").
struct CpuGroup {
  std::string name;
  std::vector<int> cpus;
};

// The NUMA nodes and L3 domains of the CPUs under `root` (a sysroot: reads
// sys/devices/system/node/node*/cpulist and cpu*/cache/index3/id).
std::vector<CpuGroup> node_groups(const std::filesystem::path& root);
std::vector<CpuGroup> l3_groups(const std::filesystem::path& root);

struct GroupBandwidth {
  CpuGroup group;
  std::vector<int> probed_cpus;  // the group's CPUs this process may run on
  double median_gbps = 0, min_gbps = 0, max_gbps = 0;
  std::string unsupported;  // non-empty: not probed, and why
};

// Probes one group pinned to its allowed CPUs (one thread per CPU), with a
// buffer of `mib` MiB first touched by those threads.
GroupBandwidth probe_group(const CpuGroup& g, size_t mib, int repeats);

// Median read bandwidth on exactly these CPUs (GB/s).
double probe_cpus(const std::vector<int>& cpus, size_t mib, int repeats);

}  // namespace epyctune::bench
