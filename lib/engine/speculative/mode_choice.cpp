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

LayoutChooser::LayoutChooser(const LayoutCosts& costs, int max_k, double start_accept,
                             const LayoutFactors& factors)
    : costs_(costs), max_k_(max_k), f_(factors), last_(choose_mode(costs, max_k, start_accept)) {
  const auto [s, p] = corrected();
  shared_ = s > p;
}

std::pair<double, double> LayoutChooser::corrected() const {
  // A layout not run yet borrows the other's correction: what slows the
  // whole host since the probe (load, the guest's bandwidth) slows both.
  const double fs = f_.shared_seen || !f_.partitioned_seen ? f_.shared : f_.partitioned;
  const double fp = f_.partitioned_seen || !f_.shared_seen ? f_.partitioned : f_.shared;
  return {last_.shared_rate * fs, last_.partitioned_rate * fp};
}

bool LayoutChooser::observe_round(double accept, int tokens, double seconds, bool drafted) {
  tokens_ += tokens;
  seconds_ += seconds;
  if (!drafted || ++rounds_ < kRoundsPerDecision) return false;
  const double measured = seconds_ > 0 ? static_cast<double>(tokens_) / seconds_ : 0.0;
  rounds_ = 0, tokens_ = 0, seconds_ = 0;
  last_ = choose_mode(costs_, max_k_, accept);
  // This layout's correction: the window's rate over the prediction at the
  // acceptance seen, replacing the prior 1 at once, then averaged with the
  // windows before it (a window is a few rounds: noisy alone).
  const double predicted = shared_ ? last_.shared_rate : last_.partitioned_rate;
  if (measured > 0 && predicted > 0) {
    double& f = shared_ ? f_.shared : f_.partitioned;
    bool& seen = shared_ ? f_.shared_seen : f_.partitioned_seen;
    f = seen ? 0.5 * f + 0.5 * measured / predicted : measured / predicted;
    seen = true;
  }
  const auto [s, p] = corrected();
  const double here = shared_ ? s : p, there = shared_ ? p : s;
  if (there <= kMargin * here) return false;
  shared_ = !shared_;
  ++switches_;
  return true;
}

}  // namespace epyctune::engine::speculative
