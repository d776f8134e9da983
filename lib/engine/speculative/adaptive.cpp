#include "engine/speculative/adaptive.hpp"

#include <algorithm>
#include <stdexcept>

namespace epyctune::engine::speculative {

namespace {
// Timings forget faster than acceptance: a host's load changes within seconds.
constexpr double kTimeDecay = 0.9;
// The slope forgets slowly: a controller settled at one K times other sizes
// only now and then (plain rounds, probes), and forgetting those would hand
// the slope back to the seed, which may have been measured under other load.
constexpr double kSlopeDecay = 0.99;
}  // namespace

AdaptiveController::AdaptiveController(AdaptiveOptions opt, const CostModel& seed)
    : opt_(opt), seed_(seed), next_backoff_(opt.backoff_min) {
  if (opt_.max_k < 1) throw std::invalid_argument("adaptive drafting needs a maximum K >= 1");
  const int slots = seed_.parallel_draft ? opt_.max_k : std::max(opt_.max_k, opt_.max_run_age);
  tried_.assign(static_cast<size_t>(slots), 0.0);
  acc_.assign(static_cast<size_t>(slots), 0.0);
  seed_prior();
}

void AdaptiveController::seed_prior() {
  prior_ = {};
  const auto& t = seed_.target;
  std::vector<std::pair<double, double>> pts;
  for (int n = 1; n <= opt_.max_k + 1; ++n)
    if (std::find(t.n.begin(), t.n.end(), n) != t.n.end() || n == 1 || n == opt_.max_k + 1)
      pts.emplace_back(n, t.at(n));
  for (const auto& [x, y] : pts) prior_.add(x, y, opt_.cost_prior_weight / double(pts.size()));
}

void AdaptiveController::reseed(const CostModel& seed) {
  // A parallel draft's acceptance slots count positions, a sequential one's
  // run ages: the slots keep their meaning only for the same kind of draft.
  if (seed.parallel_draft != seed_.parallel_draft)
    throw std::invalid_argument("reseed: the draft's kind cannot change within a run");
  seed_ = seed;
  seed_prior();
  obs_ = {}, slope_obs_ = {};
  scale_sum_ = scale_w_ = wait_sum_ = wait_w_ = plain_sum_ = plain_w_ = 0.0;
}

double AdaptiveController::pooled_accept(double extra_accepted) const {
  double t = 0, a = 0;
  for (size_t i = 0; i < tried_.size(); ++i) t += tried_[i], a += acc_[i];
  return (a + opt_.prior_accept * opt_.prior_weight + extra_accepted) /
         (t + opt_.prior_weight + extra_accepted);
}

size_t AdaptiveController::slot(int pos) const {
  const int64_t i = seed_.parallel_draft ? pos - 1 : run_ + pos - 1;
  return static_cast<size_t>(std::clamp<int64_t>(i, 0, static_cast<int64_t>(tried_.size()) - 1));
}

double AdaptiveController::slot_accept(size_t i, double pooled) const {
  return (acc_[i] + opt_.position_weight * pooled) / (tried_[i] + opt_.position_weight);
}

double AdaptiveController::expected_tokens(int k) const {
  const double pooled = pooled_accept();
  double e = 1.0, run = 1.0;
  for (int i = 1; i <= k; ++i) {
    run *= i <= opt_.max_k ? slot_accept(slot(i), pooled) : pooled;
    e += run;
  }
  return e;
}

double AdaptiveController::verify_seconds(int k) const {
  const double scale = scale_w_ > 0 ? scale_sum_ / scale_w_ : 1.0;
  const Fit& p = prior_;
  const double pmx = p.x / p.w, pmy = scale * p.y / p.w;
  const double pvar = p.xx / p.w - pmx * pmx, pcov = scale * p.xy / p.w - pmx * pmy;
  const double prior_slope = pvar > 1e-12 ? std::max(0.0, pcov / pvar) : 0.0;
  if (obs_.w <= 1e-12) return std::max(1e-9, pmy + prior_slope * (k + 1 - pmx));
  // The level is the rounds' own; the slope is the seed's until the rounds
  // have timed passes of several sizes (ridge regression toward it). Mixing
  // the seed's points into the fit instead would let their wide spread
  // outvote any number of rounds on the slope, and a seed measured under
  // other load would then keep long drafts looking dearer than they are.
  const double mx = obs_.x / obs_.w, my = obs_.y / obs_.w;
  const Fit& l = slope_obs_;
  const double lx = l.x / l.w, ly = l.y / l.w;
  const double sxx = l.xx - l.w * lx * lx, sxy = l.xy - l.w * lx * ly;
  const double slope = std::max(0.0, (sxy + opt_.cost_prior_weight * prior_slope) /
                                         (std::max(0.0, sxx) + opt_.cost_prior_weight));
  return std::max(1e-9, my + slope * (k + 1 - mx));
}

// How the wait grows with K, in proposals' worth: K for a draft that runs a
// pass per proposal (and for lookup, which costs next to nothing), the
// seed's one-pass times relative to a one-proposal pass for a parallel draft,
// whose K proposals cost one pass of about K + 1 tokens.
double AdaptiveController::draft_weight(int k) const {
  const double one = seed_.draft_seconds(1);
  if (!seed_.parallel_draft || one <= 0) return k;
  return seed_.draft_seconds(k) / one;
}

double AdaptiveController::plain_seconds() const {
  if (seed_.handback_plain_s <= 0) return verify_seconds(0);
  if (plain_w_ > 0) return plain_sum_ / plain_w_;
  const double scale = scale_w_ > 0 ? scale_sum_ / scale_w_ : 1.0;
  return std::max(1e-9, scale * seed_.handback_plain_s);
}

double AdaptiveController::round_seconds(int k) const {
  if (k <= 0) return plain_seconds();
  const double v = verify_seconds(k);
  if (wait_w_ > 0) return v + draft_weight(k) * (wait_sum_ / wait_w_);
  // Nothing timed yet: the seed's draft cost, in the units the fit now has.
  const double draft = seed_.draft_seconds(k) * v / seed_.verify_seconds(k);
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
  if (!started_) {
    // A new draft is tried at once, at the K its prior asks for up to
    // first_k: waiting for a first backoff to end costs a good draft its
    // best rounds, while a useless one costs one short round here and is
    // backed off after a round or two more, as its acceptance estimate falls.
    started_ = true;
    probing_ = true;
    return std::min(best_k(), std::max(1, opt_.first_k));
  }
  if (backoff_ > 0) {
    if (--backoff_ > 0) return 0;
    // A probe: one short draft to see whether the text has turned predictable.
    probing_ = true;
    return std::min(opt_.probe_k, opt_.max_k);
  }
  const int k = best_k();
  if (rate(k) > opt_.margin * rate(0)) return k;
  // Backing off on thin evidence is dear: two early rejections from a good
  // draft would cost it the 8+ rounds of the backoff. So a K=1 round goes on
  // while one more accepted proposal would make it pay; a useless draft's
  // growing count of rejections soon outweighs that one.
  const double a1 = pooled_accept(1.0);
  if ((1.0 + a1) / round_seconds(1) > opt_.margin * rate(0)) return 1;
  // Nothing pays: decode plain, and wait longer before each new probe.
  backoff_ = next_backoff_;
  next_backoff_ = std::min(opt_.backoff_max, 2 * next_backoff_);
  return 0;
}

void AdaptiveController::observe(const RoundObservation& r) {
  const int k = std::clamp(r.k, 0, opt_.max_k);
  // A hand-back round's time is that of another layout: it times plain
  // decoding only, and leaves the partitioned rounds' fit alone.
  const bool handed_back = r.every_cpu && seed_.handback_plain_s > 0;
  if (k > 0) {
    for (size_t i = 0; i < tried_.size(); ++i) tried_[i] *= opt_.decay, acc_[i] *= opt_.decay;
    // Proposal i is tried only when every proposal before it was accepted.
    for (int i = 0; i < k && i <= r.accepted; ++i) {
      const size_t s = slot(i + 1);
      tried_[s] += 1.0;
      if (i < r.accepted) acc_[s] += 1.0;
    }
    if (!handed_back) {
      wait_sum_ = wait_sum_ * opt_.decay + r.wait_s;
      wait_w_ = wait_w_ * opt_.decay + draft_weight(k);
    }
  }
  // The round's tokens: its accepted proposals and the target's own one. A
  // source that went dry restarts the run as a rejection does: a lookup
  // that lost its match after an edit, whether the edit was rejected or
  // taken as the verify pass's own token, finds its place again at the same
  // distance before the next edit.
  if (r.source_dry || (k > 0 && r.accepted < k))
    run_ = 0;
  else
    run_ += std::max(0, r.accepted) + 1;
  if (handed_back) {
    if (k == 0 && r.verify_s > 0) {
      plain_sum_ = plain_sum_ * kTimeDecay + r.verify_s;
      plain_w_ = plain_w_ * kTimeDecay + 1.0;
    }
  } else {
    obs_.scale(kTimeDecay);
    slope_obs_.scale(kSlopeDecay);
    if (r.verify_s > 0) {
      obs_.add(k + 1, r.verify_s, 1.0);
      slope_obs_.add(k + 1, r.verify_s, 1.0);
      scale_sum_ = scale_sum_ * kTimeDecay + r.verify_s / seed_.verify_seconds(k);
      scale_w_ = scale_w_ * kTimeDecay + 1.0;
    }
  }
  if (probing_ && k > 0) {
    probing_ = false;
    // It paid when its tokens came faster than plain decoding's: then probe
    // often again. Accepted proposals alone are not enough when verifying
    // costs nearly as much as decoding them one by one.
    const double t = r.wait_s + r.verify_s;
    if (t > 0 && (r.accepted + 1) / t > opt_.margin / plain_seconds())
      next_backoff_ = opt_.backoff_min;
  }
}

}  // namespace epyctune::engine::speculative
