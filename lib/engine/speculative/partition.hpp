// The engine's own launch plan, when no launch config gives one: which CPUs
// the target (verify side) and the draft run on, and whether they alternate
// on the same CPUs (shared: the draft side is empty) or each own a partition
// and run concurrently (partitioned). Partitioned runs the draft ahead while
// the target verifies, so neither waits for the other's pass, and keeps each
// model's working set in its own caches. So `auto` proposes a partition
// whenever there are two CPUs or more, and the engine keeps it or time-shares
// it from both layouts' measured costs (mode_choice.hpp).
// The draft gets whole L3 domains (CCX/CCD) when there are several, else
// single CPUs, from the end: as many as keep its K passes as long as the
// target's one verify pass (draft_share), and at least one. (bench/spec.md
// has the comparison.)
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "launch/launch_config.hpp"

namespace epyctune::engine::speculative {

enum class ModeRequest { shared, partitioned, automatic };

struct PartitionRequest {
  ModeRequest request = ModeRequest::automatic;
  bool has_draft_model = false;
  std::vector<int> cpus;                        // every CPU the engine may use
  std::vector<int> l3_ids;                      // parallel to cpus; -1 where unknown
  std::optional<std::vector<int>> draft_cpus;   // an explicit draft partition
  std::optional<std::vector<int>> verify_cpus;  // an explicit verify partition
  double draft_share = 0.0;                     // 0: one domain (or CPU) for the draft
};

// The share of the memory bandwidth, hence of the L3 domains, the draft needs
// so that its k passes over draft_bytes take as long as the target's one
// pass over target_bytes: decoding is bandwidth-bound and each domain brings
// its own. 0 when either size is unknown.
double draft_share(uint64_t target_bytes, uint64_t draft_bytes, int k);

// A plan with the [spec] sides only: verify always, draft when partitioned,
// each side's l3 from l3_ids; `reason` says why. Throws common::FieldError
// naming the EngineConfig field (cpus, draft_cpus, verify_cpus, spec_mode)
// for impossible requests: overlapping or empty partitions, partitioned on
// one CPU.
launch::LaunchPlan pick_partition(const PartitionRequest& in);

}  // namespace epyctune::engine::speculative
