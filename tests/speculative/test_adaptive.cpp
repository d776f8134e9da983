// The adaptive draft-length controller on synthetic rounds: a useless draft
// must end in plain decoding (no slower than it), a perfect one in long
// drafts, and a draft that starts paying again after a bad spell must be
// picked up again by the probes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/speculative/adaptive.hpp"
#include "engine/speculative/cost_model.hpp"

using namespace epyctune::engine::speculative;

namespace {
// A 7B-like host: the verify pass grows ~0.1x per extra token, a draft
// proposal costs 0.15x a single-token target pass.
CostModel host() {
  CostModel c;
  c.target.n = {1, 2, 9, 17};
  c.target.s = {1.0, 1.1, 1.9, 2.6};
  c.draft_s = 0.15;
  c.measured = true;
  return c;
}

struct Sim {
  double time = 0;
  int64_t tokens = 0;
  std::vector<int> ks;
};

// A source that sees where in the text it is: offered(k, pos) proposals of
// the k asked for (lookup finds no match after an edit), of which
// accepted(n, round, pos) are kept; pos counts the tokens generated so far.
struct Source {
  std::function<int(int, int64_t)> offered;  // empty: all k asked for
  std::function<int(int, int, int64_t)> accepted;
};
struct SimOptions {
  int max_k = 16;
  const CostModel* seed = nullptr;  // the controller's seed (default: the truth)
  int fixed_k = 0;                  // > 0: draft that K every round, no controller
};

// Runs rounds until `tokens` are generated, timed by the cost model c.
Sim run_rounds(const CostModel& c, int tokens, const Source& src, const SimOptions& so = {}) {
  AdaptiveOptions o;
  o.max_k = so.max_k;
  AdaptiveController ctl(o, so.seed ? *so.seed : c);
  Sim s;
  for (int round = 0; s.tokens < tokens; ++round) {
    const int want = so.fixed_k > 0 ? so.fixed_k : ctl.choose();
    const int k = want > 0 && src.offered ? src.offered(want, s.tokens) : want;
    const int m = k > 0 ? src.accepted(k, round, s.tokens) : 0;
    const double wait = c.draft_seconds(k), verify = c.verify_seconds(k);
    if (so.fixed_k == 0) ctl.observe({k, m, wait, verify, want > 0 && k == 0});
    s.time += wait + verify;
    s.tokens += m + 1;
    s.ks.push_back(k);
  }
  return s;
}

// accept(k, round) says how many of k proposals the target keeps.
Sim simulate(const CostModel& c, int tokens, const std::function<int(int, int)>& accept,
             int max_k = 16, const CostModel* seed = nullptr) {
  Source src;
  src.accepted = [&](int k, int round, int64_t) { return accept(k, round); };
  return run_rounds(c, tokens, src, {max_k, seed, 0});
}
double speedup(const Sim& s, const CostModel& c) {
  return double(s.tokens) / s.time * c.verify_seconds(0);
}

// The bench's first 7B run: pass times measured under other load (the
// 2-token pass faster than the 1-token one, the slope ~2.5x the quiet
// host's), seeding a controller on the quiet host it then ran on.
CostModel loaded_seed(double draft_s) {
  CostModel c;
  c.target.n = {1, 2, 3, 4, 5, 7, 9, 13, 17};
  c.target.s = {1.36, 1.07, 1.67, 2.55, 2.62, 3.29, 3.56, 4.49, 5.44};
  c.draft_s = draft_s;
  return c;
}
CostModel quiet_host(double pass_s, double draft_s) {
  CostModel c;
  c.target.n = {1, 9, 17};
  c.target.s = {pass_s, 1.9 * pass_s, 2.7 * pass_s};
  c.draft_s = draft_s;
  return c;
}

// The best fixed K's speed-up for i.i.d. per-token acceptance a, from the
// cost model the rounds run on: E(K) = (1 - a^(K+1)) / (1 - a) over time(K).
double best_fixed(const CostModel& c, double a, int max_k = 16) {
  double best = 1.0;
  for (int k = 1; k <= max_k; ++k) {
    const double e = a >= 1.0 ? k + 1.0 : (1.0 - std::pow(a, k + 1)) / (1.0 - a);
    best = std::max(best, e / c.round_seconds(k) * c.verify_seconds(0));
  }
  return best;
}

// Each proposal accepted with probability a, independently, from a seeded RNG.
std::function<int(int, int)> iid(double a, uint64_t seed) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  return [rng, a](int k, int) {
    std::bernoulli_distribution accept(a);
    int m = 0;
    while (m < k && accept(*rng)) ++m;
    return m;
  };
}
}  // namespace

TEST_CASE("a useless draft converges to plain decoding, no slower than it") {
  const CostModel c = host();
  const Sim s = simulate(c, 128, [](int, int) { return 0; });
  CHECK(speedup(s, c) >= 0.97);
  // After the first rounds only sparse probes draft.
  const auto drafted = std::count_if(s.ks.begin() + 4, s.ks.end(), [](int k) { return k > 0; });
  CHECK(drafted <= 4);
  CHECK(s.ks.back() == 0);
  // Over a long run the probes back off further: well within noise of plain.
  const Sim l = simulate(c, 2000, [](int, int) { return 0; });
  CHECK(speedup(l, c) >= 0.99);
}

TEST_CASE("a perfect draft converges to a long K") {
  const CostModel c = host();
  const Sim s = simulate(c, 400, [](int k, int) { return k; });
  REQUIRE(s.ks.size() > 10);
  for (size_t i = s.ks.size() - 10; i < s.ks.size(); ++i) CHECK(s.ks[i] >= 12);
  CHECK(speedup(s, c) > 3.0);
}

TEST_CASE("a noisy seed does not trap a perfect draft at the first K it tried") {
  // Pass times as measured on a loaded 2-core host (the 2-token pass came out
  // faster than the 1-token one), against a host where verifying is cheap.
  CostModel seed;
  seed.target.n = {1, 2, 3, 4, 5, 7, 9, 13, 17};
  seed.target.s = {1.36, 1.07, 1.67, 2.55, 2.62, 3.29, 3.56, 4.49, 5.44};
  seed.draft_s = 0.26;
  CostModel truth;
  truth.target.n = {1, 17};
  truth.target.s = {1.6, 4.0};
  truth.draft_s = 0.26;
  const Sim s = simulate(
      truth, 300, [](int k, int) { return k; }, 16, &seed);
  // Long drafts within the first 20 rounds, not after a long spell at K=1.
  CHECK(*std::max_element(s.ks.begin(), s.ks.begin() + 20) >= 8);
  for (size_t i = s.ks.size() - 3; i < s.ks.size(); ++i) CHECK(s.ks[i] >= 8);
}

TEST_CASE("a new perfect draft reaches a long K at once") {
  struct Host {
    std::string name;
    CostModel truth, seed;
  };
  const Host hosts[] = {{"seed = truth", host(), host()},
                        {"loaded seed, quiet host", quiet_host(1.36, 0.26), loaded_seed(0.26)}};
  for (const auto& h : hosts) {
    CAPTURE(h.name);
    const Sim s = simulate(
        h.truth, 64, [](int k, int) { return k; }, 16, &h.seed);
    // No plain rounds first: the draft is tried in round one and K grows fast.
    CHECK(s.ks.front() > 0);
    const auto first = s.ks.begin() + std::min<std::ptrdiff_t>(6, std::ssize(s.ks));
    CHECK(*std::max_element(s.ks.begin(), first) >= 8);
    CHECK(speedup(s, h.truth) >= 0.85 * best_fixed(h.truth, 1.0));
  }
}

TEST_CASE("a partial draft runs near the best fixed K in the long run") {
  struct Host {
    std::string name;
    CostModel truth, seed;
  };
  // The bench's 0.8 draft: a cheap draft, a target pass half the seed's and
  // a verify slope a third of it; and the perfect draft's host.
  const Host hosts[] = {
      {"seed = truth", host(), host()},
      {"loaded seed, quiet host", quiet_host(0.66, 0.1165), loaded_seed(0.1165)},
      {"loaded seed, slow quiet host", quiet_host(1.36, 0.26), loaded_seed(0.26)}};
  for (const auto& h : hosts)
    for (const double a : {0.6, 0.75, 0.9}) {
      CAPTURE(h.name);
      CAPTURE(a);
      const double best = best_fixed(h.truth, a);
      // Several seeds: one unlucky streak of rejections must not decide it.
      double sum = 0;
      constexpr int kSeeds = 5;
      for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
        const Sim s = simulate(h.truth, 2000, iid(a, seed), 16, &h.seed);
        CHECK(speedup(s, h.truth) >= 0.9 * best);
        sum += speedup(s, h.truth);
      }
      CHECK(sum / kSeeds >= 0.95 * best);
    }
}

TEST_CASE("a good draft survives an unlucky start") {
  // Acceptance 0.75, but the first two rounds reject everything: two
  // rejections are too little evidence to back off for 8+ rounds.
  const CostModel c = host();
  const double best = best_fixed(c, 0.75);
  double sum = 0;
  constexpr int kSeeds = 5;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    CAPTURE(seed);
    auto rest = iid(0.75, seed);
    const Sim s =
        simulate(c, 128, [&](int k, int round) { return round < 2 ? 0 : rest(k, round); });
    CHECK(speedup(s, c) >= 0.8 * best);
    sum += speedup(s, c);
  }
  CHECK(sum / kSeeds >= 0.92 * best);
}

TEST_CASE("a partial draft drafts a moderate K and beats plain") {
  const CostModel c = host();
  // Agreement 0.8 per token, deterministic: position i accepted when
  // (round * 7 + i) % 5 != 0.
  const Sim s = simulate(c, 600, [](int k, int round) {
    int m = 0;
    while (m < k && (round * 7 + m * 3) % 5 != 0) ++m;
    return m;
  });
  CHECK(speedup(s, c) > 1.2);
  const int last = s.ks.back();
  CHECK(last >= 1);
  CHECK(last <= 12);
}

TEST_CASE("drafting resumes when a bad spell ends") {
  const CostModel c = host();
  const Sim s =
      simulate(c, 3000, [](int k, int round) { return round < 60 || round > 200 ? 0 : k; });
  // Plain during the first spell, long drafts in the good one (a probe finds it).
  const auto long_k =
      std::count_if(s.ks.begin() + 60, s.ks.begin() + 200, [](int k) { return k >= 8; });
  CHECK(long_k > 10);
  // Few drafts in the first spell, and plain again after the good one.
  CHECK(std::count_if(s.ks.begin(), s.ks.begin() + 60, [](int k) { return k > 0; }) <= 8);
  REQUIRE(s.ks.size() > 220);
  CHECK(s.ks.back() == 0);
}

TEST_CASE("when verifying is as dear as K single passes, nothing pays") {
  CostModel c;
  c.target.n = {1, 17};
  c.target.s = {1.0, 17.0};  // weights in cache: a K-token pass costs K passes
  c.draft_s = 0.2;
  const Sim s = simulate(c, 200, [](int k, int) { return k; });
  CHECK(speedup(s, c) >= 0.97);
  // The probes accept everything but do not pay: they must still back off.
  const auto probes = std::count_if(s.ks.begin(), s.ks.end(), [](int k) { return k > 0; });
  CHECK(probes <= 5);
}

TEST_CASE("cost model: expected tokens and predicted speed-up") {
  const std::vector<double> one = {1.0}, half = {0.5}, none;
  CHECK(expected_tokens(4, one) == doctest::Approx(5.0));
  CHECK(expected_tokens(2, half) == doctest::Approx(1.75));
  CHECK(expected_tokens(3, none) == doctest::Approx(1.0));
  const CostModel c = host();
  CHECK(c.verify_seconds(0) == doctest::Approx(1.0));
  CHECK(c.verify_seconds(8) == doctest::Approx(1.9));
  CHECK(c.verify_seconds(12) == doctest::Approx(1.9 + 4 * 0.7 / 8));
  CHECK(c.verify_seconds(20) == doctest::Approx(2.6 + 4 * 0.7 / 8));  // extrapolated
  CHECK(predicted_speedup(c, 8, one) == doctest::Approx(9.0 / (8 * 0.15 + 1.9)));
  CostModel p = c;
  p.overlap = true;
  CHECK(p.round_seconds(8) == doctest::Approx(1.9));
  CHECK(predicted_speedup(c, 0, none) == doctest::Approx(1.0));
  // A parallel draft: one pass of about K + 1 tokens for K proposals.
  CostModel q = c;
  q.parallel_draft = true;
  q.draft_pass.n = {1, 9, 17};
  q.draft_pass.s = {0.15, 0.25, 0.40};
  CHECK(q.draft_seconds(8) == doctest::Approx(0.25));
  CHECK(q.round_seconds(8) == doctest::Approx(0.25 + 1.9));
  CHECK(c.draft_seconds(8) == doctest::Approx(8 * 0.15));
  // The best K at full acceptance grows as far as allowed; at none, K=1 is
  // the cheapest round (each K yields the target's one token).
  const BestK full = best_draft_k(c, 8, 1.0);
  CHECK(full.k == 8);
  CHECK(full.tokens_per_s == doctest::Approx(9.0 / (8 * 0.15 + 1.9)));
  CHECK(best_draft_k(c, 8, 0.0).k == 1);
}

TEST_CASE("a perfect parallel draft is costed as one pass per round, not K") {
  // A dear draft (0.3 of a target pass): autoregressive, 16 proposals cost
  // 4.8 passes; in parallel one pass of 17 tokens costs 0.6.
  CostModel ar = host();
  ar.draft_s = 0.3;
  CostModel par = ar;
  par.parallel_draft = true;
  par.draft_pass.n = {1, 9, 17};
  par.draft_pass.s = {0.3, 0.45, 0.6};
  const auto all = [](int k, int) { return k; };
  const Sim a = simulate(ar, 400, all), p = simulate(par, 400, all);
  REQUIRE(p.ks.size() > 10);
  for (size_t i = p.ks.size() - 10; i < p.ks.size(); ++i) CHECK(p.ks[i] == 16);
  CHECK(speedup(p, par) > 2.0 * speedup(a, ar));
  CHECK(speedup(p, par) >= 0.95 * best_fixed(par, 1.0));
  // A partial parallel draft whose pass barely grows with K: the rounds'
  // waits must be read as one pass each, or short rounds, timed first, make
  // long ones look K times dearer than they are.
  CostModel flat = par;
  flat.draft_pass.s = {0.5, 0.52, 0.55};
  const Sim f = simulate(flat, 3000, iid(0.9, 7));
  CHECK(speedup(f, flat) >= 0.95 * best_fixed(flat, 0.9));
  CHECK(f.ks.back() >= 10);
}

TEST_CASE("lookup through an edited copy drafts to the end of each span") {
  // The bench's edited copy: the answer re-emits the prompt, but every 16th
  // token was edited there, so lookup's match ends at each edit and, right
  // after it, finds nothing for a token. Pass times as probed on the dev
  // machine for the 7B target; lookup costs nothing.
  CostModel c;
  c.target.n = {1, 2, 3, 4, 5, 7, 9, 13, 17};
  c.target.s = {0.058, 0.065, 0.071, 0.076, 0.085, 0.095, 0.112, 0.162, 0.201};
  c.draft_s = 1e-6;
  constexpr int64_t kSpan = 16;
  const auto edited = [](int64_t pos) { return pos % kSpan == kSpan - 1; };
  Source src;
  src.offered = [&](int k, int64_t pos) { return pos % kSpan == 0 ? 0 : k; };
  src.accepted = [&](int k, int, int64_t pos) {
    int m = 0;
    while (m < k && !edited(pos + m)) ++m;
    return m;
  };
  double best = 0;
  int best_k = 0;
  for (int k = 1; k <= 16; ++k)
    if (const double r = speedup(run_rounds(c, 2000, src, {16, nullptr, k}), c); r > best)
      best = r, best_k = k;
  CAPTURE(best_k);
  const Sim s = run_rounds(c, 2000, src);
  // Position in the round would read the edits as acceptance falling along
  // every round and stop short of them: 82% of the best fixed K before the
  // estimate followed the run's age, 96% while a run went on through a
  // lookup that found nothing, 99% now.
  CHECK(speedup(s, c) >= 0.97 * best);
}
