// The noise verdict on synthetic samples.
#include <doctest/doctest.h>

#include <random>

#include "bench/stats.hpp"
#include "bench/stepwise.hpp"

using namespace epyctune::bench;

namespace {
// r runs of k samples each, normal around `mean` with a per-run offset.
Runs synthetic(double mean, double sd, int runs, int k, uint64_t seed, double run_sd = 0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, sd), drift(0, run_sd > 0 ? run_sd : 1e-12);
  Runs out;
  for (int r = 0; r < runs; ++r) {
    const double off = drift(rng);
    std::vector<double> v;
    for (int i = 0; i < k; ++i) v.push_back(mean + off + noise(rng));
    out.push_back(v);
  }
  return out;
}
}  // namespace

TEST_CASE("summary: median and relative spread") {
  auto s = summarize({10, 12, 11});
  CHECK(s.median == 11);
  CHECK(s.min == 10);
  CHECK(s.max == 12);
  CHECK(s.spread == doctest::Approx(2.0 / 11));
  CHECK(median({1, 2, 3, 4}) == 2.5);
}

TEST_CASE("Mann-Whitney U: exact p for small samples, normal approximation for large") {
  auto sep = mann_whitney({1, 2, 3}, {4, 5, 6});
  CHECK(sep.exact);
  CHECK(sep.u == 0);
  CHECK(sep.p == doctest::Approx(0.1));  // 2 of the 20 orderings are this extreme
  auto mixed = mann_whitney({1, 4, 5}, {2, 3, 6});
  CHECK(mixed.p > 0.5);
  auto big_a = synthetic(10, 1, 1, 60, 1)[0], big_b = synthetic(12, 1, 1, 60, 2)[0];
  auto big = mann_whitney(big_a, big_b);
  CHECK(!big.exact);
  CHECK(big.p < 1e-6);
  auto same = mann_whitney(big_a, synthetic(10, 1, 1, 60, 3)[0]);
  CHECK(same.p > 0.05);
  CHECK(mann_whitney({1, 1, 1}, {1, 1, 1}).p == 1);
}

TEST_CASE("verdict: equal distributions are within noise, clearly shifted ones significant") {
  int false_alarms = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto a = synthetic(20, 1, 3, 4, 100 + seed), b = synthetic(20, 1, 3, 4, 200 + seed);
    false_alarms += compare(a, b, seed).verdict == Verdict::significant;
  }
  CHECK(false_alarms <= 3);  // a 95% interval: about 1 in 20 by chance
  auto a = synthetic(20, 1, 3, 4, 1), b = synthetic(26, 1, 3, 4, 2);
  auto c = compare(a, b);
  CHECK(c.verdict == Verdict::significant);
  CHECK(c.ci.lo > 0);
  CHECK(c.ci.diff == doctest::Approx(6).epsilon(0.2));
  auto down = compare(b, a);
  CHECK(down.verdict == Verdict::significant);
  CHECK(down.ci.hi < 0);
  CHECK(compare({{1}}, {{2}}).verdict == Verdict::not_enough_data);
}

TEST_CASE("run-to-run drift widens the interval instead of posing as an effect") {
  // Same mean, large drift between runs, tight samples within each run.
  auto a = synthetic(20, 0.05, 3, 8, 5, 2.0), b = synthetic(20, 0.05, 3, 8, 6, 2.0);
  auto c = compare(a, b);
  CHECK(c.ci.hi - c.ci.lo > 1.0);
}

TEST_CASE("block rates from per-token gaps") {
  auto r = block_rates({100, 100, 100, 100, 50, 50, 50, 50, 10}, 4);
  REQUIRE(r.size() == 2);
  CHECK(r[0] == doctest::Approx(10));
  CHECK(r[1] == doctest::Approx(20));
  // A burst accepted in one pass (zero gaps) stays inside its block.
  auto s = block_rates({200, 0, 0, 0}, 4);
  CHECK(s[0] == doctest::Approx(20));
}
