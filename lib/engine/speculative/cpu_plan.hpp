// Which CPUs the draft and the target run on, and whether they alternate on
// the same CPUs (shared) or each own a partition and run concurrently
// (partitioned). Partitioned runs the draft ahead while the target verifies,
// so neither waits for the other's pass, and keeps each model's working set
// in its own caches; time-sharing only wins when there is nothing to split.
// So `auto` partitions whenever there are two CPUs or more. The draft gets
// whole L3 domains (CCX/CCD) when there are several, else single CPUs, from
// the end: as many as keep its K passes as long as the target's one verify
// pass (draft_share), and at least one. (bench/spec.md has the comparison.)
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/speculative/speculative.hpp"

namespace epyctune::engine::speculative {

enum class ModeRequest { shared, partitioned, automatic };
// "shared" | "partitioned" | "auto"; throws std::invalid_argument naming the choices.
ModeRequest parse_mode_request(std::string_view s);

struct CpuPlan {
  SpecMode mode = SpecMode::shared;
  std::vector<int> shared_cpus;  // shared: both models' pool
  std::vector<int> draft_cpus;   // partitioned: the draft's pool
  std::vector<int> verify_cpus;  // partitioned: the target's pool
  std::string reason;            // why this mode (printed in --json)
};

struct CpuPlanInput {
  ModeRequest request = ModeRequest::automatic;
  bool has_draft_model = false;
  std::vector<int> cpus;                        // --cpus, or every allowed CPU
  std::vector<int> l3_ids;                      // parallel to cpus; -1 where unknown
  std::optional<std::vector<int>> draft_cpus;   // --draft-cpus
  std::optional<std::vector<int>> verify_cpus;  // --verify-cpus
  double draft_share = 0.0;                     // 0: one domain (or CPU) for the draft
};

// The share of the memory bandwidth, hence of the L3 domains, the draft needs
// so that its k passes over draft_bytes take as long as the target's one
// pass over target_bytes: decoding is bandwidth-bound and each domain brings
// its own. 0 when either size is unknown.
double draft_share(uint64_t target_bytes, uint64_t draft_bytes, int k);

// Throws std::invalid_argument for impossible requests (overlapping or empty
// partitions, partitioned on one CPU), naming the option to fix.
CpuPlan plan_cpus(const CpuPlanInput& in);

// L3 cache id of each CPU from ROOT/sys/devices/system/cpu/cpuN/cache/index3/id
// (-1 when the file is missing or garbled). Read-only, so the engine needs no
// confined host access for it.
std::vector<int> read_l3_ids(const std::filesystem::path& root, const std::vector<int>& cpus);

}  // namespace epyctune::engine::speculative
