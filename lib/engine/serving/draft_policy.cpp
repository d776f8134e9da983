#include "engine/serving/draft_policy.hpp"

#include <algorithm>

namespace epyctune::engine::serving {

namespace {
// The fit forgets a pass's weight over ~50 passes: contexts grow and the
// host's load changes.
constexpr double kKeep = 0.98;
// Before the passes' row counts have varied enough to fit a line, a draft
// row is taken to cost what a decode row's share of the pass does at 4
// rows: 1 / 4 of B / (a + r B) at B = 1, so likely proposals go ahead and
// the fit gets the varied passes it needs.
constexpr double kPriorThreshold = 0.25;
}  // namespace

void DraftPolicy::observed(int rows, double seconds) {
  if (rows <= 0 || !(seconds > 0)) return;
  const double x = rows;
  n_ = kKeep * n_ + 1;
  sx_ = kKeep * sx_ + x;
  sy_ = kKeep * sy_ + seconds;
  sxx_ = kKeep * sxx_ + x * x;
  sxy_ = kKeep * sxy_ + x * seconds;
}

int DraftPolicy::rows_worth(int proposed, double accept, int decoding) const {
  if (proposed <= 0 || decoding <= 0) return 0;
  double threshold = fixed_ >= 0 ? fixed_ : kPriorThreshold;
  const double var = n_ * sxx_ - sx_ * sx_;
  // Row counts that varied by about a row or more across recent passes.
  if (fixed_ < 0 && n_ >= 4 && var > 0.5 * n_ * n_) {
    const double r = std::max(0.0, (n_ * sxy_ - sx_ * sy_) / var);
    const double a = std::max(0.0, (sy_ - r * sx_) / n_);
    const double b = decoding;
    threshold = a + r * b > 0 ? r * b / (a + r * b) : 1.0;
  }
  int rows = 0;
  double p = 1.0;
  while (rows < proposed) {
    p *= accept;
    if (!(p > threshold)) break;
    ++rows;
  }
  return rows;
}

double DraftPolicy::updated(double accept, int verified, int accepted) {
  // Each verified proposal counts once, oldest first: accepted ones lead.
  for (int i = 0; i < verified; ++i) accept = 0.8 * accept + 0.2 * (i < accepted ? 1.0 : 0.0);
  return accept;
}

double DraftPolicy::declined(double accept) {
  return accept < kPriorAccept ? 0.97 * accept + 0.03 * kPriorAccept : accept;
}

}  // namespace epyctune::engine::serving
