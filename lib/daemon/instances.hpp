// Where each configured engine instance runs: its own partition carved out of
// the launch plan the tuner computed for the profile (launch/from_profile.hpp),
// written as one launch config per instance that `epyctune-engine serve
// --launch-config` reads. By default the plan's verify side (and its draft
// side, among the instances with a draft model) is cut into contiguous slices
// along L3 domains, one per instance; `cpus`/`draft_cpus` in the config
// override the slice. Instances never share a CPU.
#pragma once

#include <string>
#include <vector>

#include "daemon/config.hpp"
#include "host/sysroot.hpp"
#include "host/topology.hpp"
#include "launch/launch_config.hpp"

namespace epyctune::daemon {

struct InstancePlan {
  InstanceConfig cfg;
  launch::LaunchPlan plan;     // what the instance's launch config holds (incl. [models])
  std::vector<int> cpus;       // every plan CPU the instance uses (verify + draft)
  std::vector<int> nodes;      // NUMA nodes of those CPUs
  std::string launch_config;   // host path: /run/epyctune/instances/NAME.toml
  std::vector<int> host_cpus;  // map_cpus: this machine's CPUs it is confined to
  std::string note;            // how the slice was cut, when not along L3 domains
};

// Carves every instance's partition. Throws ConfigError naming the config
// file, the instance's line and the fix when an explicit list leaves the plan,
// instances overlap, or the plan has too few CPUs for the instances.
std::vector<InstancePlan> carve_instances(const Config& c, const launch::LaunchPlan& plan,
                                          const host::Topology& topo);

// map_cpus: gives each instance a disjoint, contiguous share of `allowed`
// (this machine's CPUs), in order. Throws ConfigError when there are fewer
// CPUs than instances.
void map_onto_host(std::vector<InstancePlan>& instances, const std::vector<int>& allowed,
                   const std::string& source);

// The instance's launch config text (docs/launch-config.md format).
std::string launch_config_text(const InstancePlan& i);

// The run directory for instance launch configs, beneath the sysroot.
inline constexpr const char* kInstanceDir = "/run/epyctune/instances";

}  // namespace epyctune::daemon
