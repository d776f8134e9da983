#include "engine/serving/draft_policy.hpp"

#include <algorithm>
#include <vector>

namespace epyctune::engine::serving {

namespace {
constexpr double kKeep = 0.98;
// Before the passes' row counts have varied enough to fit a line, a draft
// row is taken to cost what a decode row's share of the pass does at 4
// rows: 1 / 4 of B / (a + r B) at B = 1, so likely proposals go ahead and
// the fit gets the varied passes it needs.
constexpr double kPriorThreshold = 0.25;
// A draft model's length before either model's passes are timed: short,
// so the first rounds cost little and time both.
constexpr int kProbeDrafts = 2;
}  // namespace

void PassFit::observed(int rows, double seconds) {
  if (rows <= 0 || !(seconds > 0)) return;
  const double x = rows;
  n_ = kKeep * n_ + 1;
  sx_ = kKeep * sx_ + x;
  sy_ = kKeep * sy_ + seconds;
  sxx_ = kKeep * sxx_ + x * x;
  sxy_ = kKeep * sxy_ + x * seconds;
}

bool PassFit::sloped() const {
  return n_ >= 4 && n_ * sxx_ - sx_ * sx_ > 0.5 * n_ * n_;
}

double PassFit::r() const {
  if (!sloped()) return 0;
  return std::max(0.0, (n_ * sxy_ - sx_ * sy_) / (n_ * sxx_ - sx_ * sx_));
}

double PassFit::a() const {
  if (empty()) return 0;
  return std::max(0.0, (sy_ - r() * sx_) / n_);
}

double PassFit::seconds(int rows) const {
  return a() + r() * rows;
}

int DraftPolicy::rows_worth(int proposed, double accept, int decoding) const {
  if (proposed <= 0 || decoding <= 0) return 0;
  double threshold = fixed_ >= 0 ? fixed_ : kPriorThreshold;
  if (fixed_ < 0 && target_.sloped()) {
    const double a = target_.a(), r = target_.r(), b = decoding;
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

int DraftPolicy::draft_len(std::span<const double> accept, std::span<const int> room, int rows,
                           int decoding, const PassFit& draft) const {
  int longest = 0, drafting = 0;
  for (int n : room) {
    longest = std::max(longest, n);
    drafting += n > 0 ? 1 : 0;
  }
  if (longest == 0 || decoding <= 0) return 0;
  if (fixed_ >= 0) return longest;
  if (target_.empty() || draft.empty()) return std::min(longest, kProbeDrafts);
  // Each request gives its decode token, and with k proposals the i-th of
  // them with chance p^i; the step costs k draft passes and the rows.
  int best_k = 0;
  double best = double(decoding) / target_.seconds(rows);
  double tokens = decoding;
  int extra = 0;
  std::vector<double> chance(accept.size(), 1.0);  // p^k, each request's k-th proposal
  for (int k = 1; k <= longest; ++k) {
    for (size_t i = 0; i < room.size(); ++i) {
      if (room[i] < k) continue;
      chance[i] *= accept[i];
      tokens += chance[i];
      ++extra;
    }
    const double s = target_.seconds(rows + extra) + k * draft.seconds(drafting);
    if (s > 0 && tokens / s > best) {
      best = tokens / s;
      best_k = k;
    }
  }
  return best_k;
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
