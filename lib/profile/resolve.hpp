// A profile against a real host: which CPUs draft, verify and housekeeping
// get, and whether the profile is for this machine at all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/topology.hpp"
#include "launch/launch_config.hpp"
#include "profile/loader.hpp"
#include "profile/profile.hpp"

namespace epyctune::profile {

// A profile's partition resolved onto real CPUs of a Topology: the two sides
// the launch plan carries (plan_from_profile copies them whole), plus the CPUs
// that run neither, which only the stack's steps need.
struct HostPartition {
  launch::Side draft{launch::Role::draft}, verify{launch::Role::verify};
  std::vector<int> housekeeping_cpus;
  // SMT siblings of inference cores when use_smt_siblings is false: online but
  // given no work (gone once the bios step turns SMT off).
  std::vector<int> idle_sibling_cpus;
  std::vector<int> housekeeping_cores;  // Core::id, after adding housekeeping_cpus' cores

  // Every CPU that runs inference, sorted.
  std::vector<int> inference_cpus() const;
};

// Draft = the non-housekeeping cores of partition.draft_l3; verify = those of
// verify_l3 (or every other domain). Housekeeping = housekeeping_cores, the
// cores of housekeeping_cpus, and the cores of domains in neither list.
// Without use_smt_siblings only each core's first thread works; the others are
// idle_sibling_cpus. Each side's threads (spec.*_threads, capped by its CPUs)
// and resctrl group (when cat is enabled) come from the profile too. Throws
// ProfileError if a domain, core or CPU does not exist, or draft or verify
// ends up with no CPU.
HostPartition resolve_partition(const Profile& p, const host::Topology& t);

// A side on these CPUs of the topology: the L3 domains and NUMA nodes of
// their cores. The one derivation of a side's facts from its CPUs: the
// profile's partition and the daemon's slices of it both come from here.
launch::Side side_on(launch::Role role, std::vector<int> cpus, const host::Topology& t);

// numa.hugepages_2m_per_node = "auto": model_gb GiB (2^30 bytes, the one
// convention everywhere) times hugepage_headroom, spread over `nodes` nodes,
// in 2 MiB pages rounded up. 0 when model_gb or nodes is 0.
int64_t auto_hugepages_2m_per_node(const NumaStep& n, int nodes);

struct MatchResult {
  bool matches = false;                 // no mismatch
  int score = 0;                        // 0-100: how much of the expected hardware was confirmed
  std::vector<std::string> reasons;     // what agreed, and what could not be checked
  std::vector<std::string> mismatches;  // "cores per socket: profile 128, host 2"
};

MatchResult match_profile(const Profile& p, const host::Topology& t);

// Throws ProfileError naming every mismatch with the profile's and the host's
// value, unless force.
void require_match(const Profile& p, const host::Topology& t, bool force);

}  // namespace epyctune::profile
