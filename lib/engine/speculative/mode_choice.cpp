#include "engine/speculative/mode_choice.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace epyctune::engine::speculative {

double best_rate(const CostModel& c, int max_k, double accept) {
  return std::max(1.0 / c.plain_seconds(), best_draft_k(c, max_k, accept).tokens_per_s);
}

ModeDecision choose_mode(const LayoutCosts& c, int max_k, double accept) {
  ModeDecision d;
  d.shared_rate = best_rate(c.shared, max_k, accept);
  d.partitioned_rate = best_rate(c.partitioned, max_k, accept);
  d.partitioned = d.partitioned_rate >= d.shared_rate;
  d.reason = fmt::format(
      "auto from measured costs: predicted {:.2f} tok/s shared vs {:.2f} partitioned at "
      "acceptance {:.1f}",
      d.shared_rate, d.partitioned_rate, accept);
  return d;
}

LayoutChooser::LayoutChooser(const LayoutCosts& costs, int max_k, double start_accept)
    : costs_(costs), max_k_(max_k), last_(choose_mode(costs, max_k, start_accept)) {
  shared_ = !last_.partitioned;
}

bool LayoutChooser::observe_round(double accept) {
  if (++rounds_ < kRoundsPerDecision) return false;
  rounds_ = 0;
  last_ = choose_mode(costs_, max_k_, accept);
  const double here = shared_ ? last_.shared_rate : last_.partitioned_rate;
  const double there = shared_ ? last_.partitioned_rate : last_.shared_rate;
  if (there <= kMargin * here) return false;
  shared_ = !shared_;
  ++switches_;
  return true;
}

launch::LaunchPlan shared_plan(const launch::LaunchPlan& plan) {
  launch::LaunchPlan s = plan;
  s.verify.cpus.insert(s.verify.cpus.end(), plan.draft.cpus.begin(), plan.draft.cpus.end());
  std::sort(s.verify.cpus.begin(), s.verify.cpus.end());
  s.verify.l3.insert(s.verify.l3.end(), plan.draft.l3.begin(), plan.draft.l3.end());
  std::sort(s.verify.l3.begin(), s.verify.l3.end());
  s.verify.l3.erase(std::unique(s.verify.l3.begin(), s.verify.l3.end()), s.verify.l3.end());
  s.verify.nodes.insert(s.verify.nodes.end(), plan.draft.nodes.begin(), plan.draft.nodes.end());
  std::sort(s.verify.nodes.begin(), s.verify.nodes.end());
  s.verify.nodes.erase(std::unique(s.verify.nodes.begin(), s.verify.nodes.end()),
                       s.verify.nodes.end());
  if (s.verify.threads > 0) s.verify.threads = static_cast<int>(s.verify.cpus.size());
  s.draft = launch::Side{launch::Role::draft};
  return s;
}

}  // namespace epyctune::engine::speculative
