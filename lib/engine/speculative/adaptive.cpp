#include "engine/speculative/adaptive.hpp"

#include <algorithm>
#include <stdexcept>

namespace epyctune::engine::speculative {

namespace {
// Verify timings per K forget faster than acceptance: a K's own samples are
// few, and a host's load changes within seconds.
constexpr double kTimeDecay = 0.8;
}  // namespace

AdaptiveController::AdaptiveController(AdaptiveOptions opt, const CostModel& seed)
    : opt_(opt), seed_(seed), next_backoff_(opt.backoff_min) {
  if (opt_.max_k < 1) throw std::invalid_argument("adaptive drafting needs a maximum K >= 1");
  tried_.assign(static_cast<size_t>(opt_.max_k), 0.0);
  acc_.assign(static_cast<size_t>(opt_.max_k), 0.0);
  vsum_.assign(static_cast<size_t>(opt_.max_k) + 1, 0.0);
  vw_.assign(static_cast<size_t>(opt_.max_k) + 1, 0.0);
}

double AdaptiveController::pooled_accept() const {
  double t = 0, a = 0;
  for (size_t i = 0; i < tried_.size(); ++i) t += tried_[i], a += acc_[i];
  return (a + opt_.prior_accept * opt_.prior_weight) / (t + opt_.prior_weight);
}

double AdaptiveController::accept_at(int pos) const {
  const double pooled = pooled_accept();
  if (pos < 1 || pos > opt_.max_k) return pooled;
  const auto i = static_cast<size_t>(pos - 1);
  return (acc_[i] + opt_.position_weight * pooled) / (tried_[i] + opt_.position_weight);
}

double AdaptiveController::expected_tokens(int k) const {
  const double pooled = pooled_accept();
  double e = 1.0, run = 1.0;
  for (int i = 1; i <= k; ++i) {
    const double a = i <= opt_.max_k
                         ? (acc_[static_cast<size_t>(i - 1)] + opt_.position_weight * pooled) /
                               (tried_[static_cast<size_t>(i - 1)] + opt_.position_weight)
                         : pooled;
    run *= a;
    e += run;
  }
  return e;
}

double AdaptiveController::verify_seconds(int k) const {
  const auto i = static_cast<size_t>(std::clamp(k, 0, opt_.max_k));
  if (vw_[i] >= 0.5) return vsum_[i] / vw_[i];
  // Never (or long ago) seen: the seed's curve, scaled to what this run measures.
  const double scale = scale_w_ > 0 ? scale_sum_ / scale_w_ : 1.0;
  return seed_.verify_seconds(k) * scale;
}

double AdaptiveController::round_seconds(int k) const {
  const double v = verify_seconds(k);
  if (k <= 0) return v;
  if (wait_w_ > 0) return v + k * (wait_sum_ / wait_w_);
  const double scale = scale_w_ > 0 ? scale_sum_ / scale_w_ : 1.0;
  const double draft = seed_.draft_s * scale * k;
  return seed_.overlap ? std::max(v, draft) : v + draft;
}

int AdaptiveController::best_k() const {
  int best = 1;
  double best_rate = rate(1);
  for (int k = 2; k <= opt_.max_k; ++k)
    if (const double r = rate(k); r > best_rate) best = k, best_rate = r;
  return best;
}

int AdaptiveController::choose() {
  if (backoff_ > 0) {
    if (--backoff_ > 0) return 0;
    // A probe: one short draft to see whether the text has turned predictable.
    probing_ = true;
    return std::min(opt_.probe_k, opt_.max_k);
  }
  const int k = best_k();
  if (rate(k) > opt_.margin * rate(0)) return k;
  // Nothing pays: decode plain, and wait longer before each new probe.
  backoff_ = next_backoff_;
  next_backoff_ = std::min(opt_.backoff_max, 2 * next_backoff_);
  return 0;
}

void AdaptiveController::observe(const RoundObservation& r) {
  const int k = std::clamp(r.k, 0, opt_.max_k);
  if (k > 0) {
    for (size_t i = 0; i < tried_.size(); ++i) tried_[i] *= opt_.decay, acc_[i] *= opt_.decay;
    // Position i is tried only when every proposal before it was accepted.
    for (int i = 0; i < k && i <= r.accepted; ++i) {
      tried_[static_cast<size_t>(i)] += 1.0;
      if (i < r.accepted) acc_[static_cast<size_t>(i)] += 1.0;
    }
    wait_sum_ = wait_sum_ * opt_.decay + r.wait_s;
    wait_w_ = wait_w_ * opt_.decay + k;
  }
  const auto i = static_cast<size_t>(k);
  vsum_[i] = vsum_[i] * kTimeDecay + r.verify_s;
  vw_[i] = vw_[i] * kTimeDecay + 1.0;
  if (const double seeded = seed_.verify_seconds(k); seeded > 0 && r.verify_s > 0) {
    scale_sum_ = scale_sum_ * kTimeDecay + r.verify_s / seeded;
    scale_w_ = scale_w_ * kTimeDecay + 1.0;
  }
  if (probing_ && k > 0) {
    probing_ = false;
    // It paid when its tokens came faster than plain decoding's: then probe
    // often again. Accepted proposals alone are not enough when verifying
    // costs nearly as much as decoding them one by one.
    const double t = r.wait_s + r.verify_s;
    if (t > 0 && (r.accepted + 1) / t > opt_.margin / verify_seconds(0))
      next_backoff_ = opt_.backoff_min;
  }
}

}  // namespace epyctune::engine::speculative
