// Shared or partitioned, from this host's measured figures: when the cost
// cache holds pass times for the target and the draft both on all the CPUs
// and on the partitions `auto` would use, the mode whose best K (or plain
// decoding) predicts more tokens per second wins. Without those figures the
// plan stays as pick_partition made it, and its reason says how to record them.
#pragma once

#include <string>
#include <vector>

#include "engine/speculative/cost_model.hpp"
#include "launch/launch_config.hpp"

namespace epyctune::engine::speculative {

struct ModeChoiceInput {
  launch::LaunchPlan automatic;  // pick_partition's partitioned choice
  std::string target_path, draft_path, isa;
  int max_k = 16;
  // Acceptance is unknown before the first round: a middling draft.
  double accept = 0.7;
};

// Tokens per second of the best K (or plain) under c.
double best_rate(const CostModel& c, int max_k, double accept);

launch::LaunchPlan choose_mode(const ModeChoiceInput& in);

}  // namespace epyctune::engine::speculative
