// Shared or partitioned, from this host's measured pass times of both
// layouts: the mode whose best K (or plain decoding) predicts more tokens per
// second at a middling acceptance wins. The engine measures what the cost
// cache lacks when it loads, so the first run decides as well as later ones.
#pragma once

#include <string>

#include "engine/speculative/cost_model.hpp"
#include "launch/launch_config.hpp"

namespace epyctune::engine::speculative {

struct LayoutCosts {
  // Target and draft alternating on every CPU of both sides.
  CostModel shared;
  // Each on its own side, drafting overlapped with verifying; plain passes
  // on every CPU (handback_plain_s), since drafting then hands its CPUs back.
  CostModel partitioned;
};

struct ModeDecision {
  bool partitioned = true;
  double shared_rate = 0, partitioned_rate = 0;  // predicted tokens per second
  std::string reason;
};

// Acceptance is unknown before the first round: a middling draft.
constexpr double kModeChoiceAccept = 0.7;

// Tokens per second of the best K (or plain) under c.
double best_rate(const CostModel& c, int max_k, double accept);

ModeDecision choose_mode(const LayoutCosts& c, int max_k, double accept = kModeChoiceAccept);

// The partitioned plan run time-shared: the verify side on every CPU of both
// sides (its L3 domains those of both), no draft side.
launch::LaunchPlan shared_plan(const launch::LaunchPlan& partitioned);

}  // namespace epyctune::engine::speculative
