// Adaptive draft length: picks K for each speculative round from what the
// rounds so far have shown, so a good draft gets long drafts and a useless
// one is switched off instead of slowing decoding down.
//
// Per round the target yields E(K) = 1 + sum_{i<=K} prod_{j<=i} a_j tokens,
// where a_j = P(proposal j accepted | proposals 1..j-1 accepted), and the
// round costs time(K) = wait(K) + verify(K). For a source that proposes one
// token after another (a draft model, lookup), a_j is estimated by the age
// of the run the proposal would extend: the tokens since the last rejection,
// or since the source last had nothing to propose. Acceptance there follows
// the text, not the round: a lookup match ends where the edited span does,
// wherever the round began, and a draft model meets a hard stretch after an
// easy one. Indexing by position in the round instead mixes proposals at
// every age, so long spans look like geometric decay and the rounds stop
// short of where the run really ends. A parallel draft's proposal j is
// predicted without the j-1 before it, so there the position in the round is
// what its acceptance depends on.
//
// The controller picks the K with the best E/time, the first round at once
// whatever the prior says; when no K beats plain decoding (one single-token
// pass per token) it decodes plain and probes again later, waiting longer
// each time a probe fails and starting over when one pays.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/speculative/cost_model.hpp"

namespace epyctune::engine::speculative {

struct AdaptiveOptions {
  int max_k = 16;
  // Prior acceptance and its weight in pseudo-rounds. Optimistic, so a new
  // draft starts at a K that lets a good one show itself in its first round;
  // the low weight lets one failed round count, so a useless draft is backed
  // off after a round or two.
  double prior_accept = 0.8;
  double prior_weight = 1.0;
  // Shrinks a position's estimate toward the all-positions one, so positions
  // never reached yet borrow what the reached ones show.
  double position_weight = 2.0;
  // Run ages told apart (the last slot holds every older age).
  int max_run_age = 64;
  // Per-round forgetting of old evidence (acceptance drifts with the text).
  double decay = 0.97;
  // A K must beat plain decoding by this factor to be drafted.
  double margin = 1.02;
  int backoff_min = 8, backoff_max = 128;  // plain rounds before a probe
  // Weight (in rounds, times squared tokens of spread) of the cost model's
  // verify slope against the rounds' own: it holds until rounds at several K
  // have been timed, while the rounds move the level at once.
  double cost_prior_weight = 4.0;
  int probe_k = 1;
  // The first round drafts at most this: a draft is unknown until it has
  // been tried, and a useless one's first round costs K draft passes and a
  // (K+1)-token verify, which at K = 16 is a few plain tokens' time on two
  // CPUs; a good one grows K from its second round on.
  int first_k = 4;
};

// What the controller saw in one round: k proposals verified, m accepted,
// the verifier's time waiting for proposals and in the verify pass.
struct RoundObservation {
  int k = 0;
  int accepted = 0;
  double wait_s = 0.0;
  double verify_s = 0.0;
  // The source had nothing for a round that asked (lookup found no match):
  // it has lost the text, and the run it tracks starts again after it.
  bool source_dry = false;
  // Run on every CPU while the draft's partition was handed back (a plain
  // round, or the time-shared probe after plain rounds): its time says what
  // plain decoding costs, not what a partitioned round does.
  bool every_cpu = false;
};

class AdaptiveController {
 public:
  AdaptiveController(AdaptiveOptions opt, const CostModel& seed);

  // K for the next round: 0 = plain decoding.
  int choose();
  void observe(const RoundObservation& r);

  // The current estimates (also what bench prints as the prediction).
  double expected_tokens(int k) const;
  double round_seconds(int k) const;
  double rate(int k) const { return expected_tokens(k) / round_seconds(k); }
  int best_k() const;  // argmax of rate over 1..max_k
  int backoff() const { return backoff_; }
  // The acceptance of a proposal, all positions pooled with the prior.
  double acceptance() const { return pooled_accept(); }
  // Costs of another layout from the next round on (the run moved between
  // shared and partitioned): the timings so far were of the old layout and
  // are dropped, what the rounds showed of the draft's acceptance is kept.
  void reseed(const CostModel& seed);

 private:
  double verify_seconds(int k) const;
  // A plain round: on every CPU when the seed hands the draft's CPUs back.
  double plain_seconds() const;
  double draft_weight(int k) const;
  // All positions together; extra_accepted adds pseudo-accepted proposals.
  double pooled_accept(double extra_accepted = 0.0) const;
  // The estimate slot of proposal pos (1-based) of the next round.
  size_t slot(int pos) const;
  double slot_accept(size_t i, double pooled) const;
  // The prior verify line from the seed's points (prior_).
  void seed_prior();

  AdaptiveOptions opt_;
  CostModel seed_;
  // Decayed counts per slot: run age, or position in the round (slot()).
  std::vector<double> tried_, acc_;
  int64_t run_ = 0;  // tokens since the last rejection, or since the source went dry
  // Verify time as a line in the pass's tokens: the seed's points give a
  // prior slope, the rounds' timings (decayed) the level and, once they
  // spread over several K, the slope. A per-K table would trap the
  // controller at the first K it tried: the others would never be timed, so
  // never look cheaper.
  struct Fit {
    double w = 0, x = 0, y = 0, xx = 0, xy = 0;
    void add(double px, double py, double pw) {
      w += pw, x += pw * px, y += pw * py, xx += pw * px * px, xy += pw * px * py;
    }
    void scale(double f) { w *= f, x *= f, y *= f, xx *= f, xy *= f; }
  };
  Fit prior_, obs_, slope_obs_;  // slope_obs_: the same timings, kept longer
  // The seed in this run's units: decayed mean of timed / seeded (the seed
  // may be relative, or measured under another load).
  double scale_sum_ = 0.0, scale_w_ = 0.0;
  double wait_sum_ = 0.0, wait_w_ = 0.0;    // per unit of draft_weight
  double plain_sum_ = 0.0, plain_w_ = 0.0;  // hand-back plain rounds (decayed)
  int backoff_ = 0;                         // plain rounds left before a probe
  int next_backoff_;
  bool probing_ = false;
  bool started_ = false;
};

}  // namespace epyctune::engine::speculative
