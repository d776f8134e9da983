// Shared or partitioned, from this host's measured pass times of both
// layouts: the mode whose best K (or plain decoding) predicts more tokens per
// second at a middling acceptance wins. The engine measures what the cost
// cache lacks when it loads, so the first run decides as well as later ones.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "engine/speculative/cost_model.hpp"

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

// Measured over predicted tokens per second, per layout: the probe times
// each model alone, so it misses what running both at once costs (a
// partition's draft and verify share the memory bandwidth, and a guest's
// vCPUs may share cores). A layout not run yet takes the other's.
struct LayoutFactors {
  double shared = 1.0, partitioned = 1.0;
  bool shared_seen = false, partitioned_seen = false;
};

// Which layout a run's next rounds use, from what its rounds have shown: the
// run starts in the layout that wins at the acceptance it is given (the last
// run's, or kModeChoiceAccept), and moves when the other predicts more
// tokens per second, by a margin, at the acceptance seen since, each
// layout's prediction corrected by what its own rounds achieved against it.
// Time-sharing wins for a draft that is often wrong (its passes and the
// verify's use every CPU); a partition for one that is nearly always right
// where the verify side alone keeps up with the draft.
class LayoutChooser {
 public:
  LayoutChooser(const LayoutCosts& costs, int max_k, double start_accept,
                const LayoutFactors& factors = {});
  bool shared() const { return shared_; }
  const CostModel& current() const { return shared_ ? costs_.shared : costs_.partitioned; }
  // After each round: the tokens it gave and its wall seconds (a move
  // before it included), and whether it drafted. True when the layout
  // changes for the next round.
  bool observe_round(double accept, int tokens, double seconds, bool drafted);
  const ModeDecision& last() const { return last_; }
  const LayoutFactors& factors() const { return f_; }
  int switches() const { return switches_; }

  // Drafted rounds between decisions, and how much more the other layout
  // must predict: each move pauses the drafting thread or restarts it.
  static constexpr int kRoundsPerDecision = 4;
  static constexpr double kMargin = 1.05;

 private:
  // last_'s predicted tokens per second of each layout, corrected.
  std::pair<double, double> corrected() const;
  LayoutCosts costs_;
  int max_k_;
  bool shared_ = false;
  int rounds_ = 0, switches_ = 0;
  int64_t tokens_ = 0;
  double seconds_ = 0;
  LayoutFactors f_;
  ModeDecision last_;
};

}  // namespace epyctune::engine::speculative
