// The rejection step alone, on hand-made p/q pairs: whatever q proposes, the
// accepted-or-resampled token must follow p.
#include <doctest/doctest.h>

#include <vector>

#include "engine/sampling/rng.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/speculative/rejection.hpp"

using namespace epyctune::engine;

namespace {
// Chi-square of counts against p over n draws.
double chi2(const std::vector<int>& counts, const std::vector<float>& p, int n) {
  double c = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = n * static_cast<double>(p[i]);
    if (e == 0.0) {
      REQUIRE(counts[i] == 0);
      continue;
    }
    c += (counts[i] - e) * (counts[i] - e) / e;
  }
  return c;
}

std::vector<int> run(const std::vector<float>& p, const std::vector<float>& q, bool one_hot_x,
                     int x_fixed, int n, uint64_t seed, double* accept_rate) {
  sampling::Xoshiro256 rng(seed);
  std::vector<int> counts(p.size(), 0);
  std::vector<float> scratch;
  int acc = 0;
  for (int i = 0; i < n; ++i) {
    const int x = one_hot_x ? x_fixed : sampling::sample_from(q, rng.uniform());
    const double ua = rng.uniform(), ur = rng.uniform();
    const auto v =
        speculative::rejection_step(p, one_hot_x ? std::vector<float>{} : q, x, ua, ur, scratch);
    acc += v.accepted;
    ++counts[static_cast<size_t>(v.token)];
  }
  *accept_rate = double(acc) / n;
  return counts;
}
}  // namespace

TEST_CASE("rejection sampling with a draft distribution reproduces p") {
  const std::vector<float> p = {0.05f, 0.30f, 0.10f, 0.25f, 0.20f, 0.10f};
  const std::vector<float> q = {0.30f, 0.10f, 0.25f, 0.05f, 0.20f, 0.10f};
  const int n = 200000;
  double acc = 0.0;
  const auto counts = run(p, q, false, 0, n, 12345, &acc);
  CHECK(chi2(counts, p, n) < 20.5);  // 5 dof, p = 0.001
  // Theory: acceptance = sum_x min(p, q) = 0.05+0.10+0.10+0.05+0.20+0.10 = 0.60.
  CHECK(acc == doctest::Approx(0.60).epsilon(0.01));
}

TEST_CASE("rejection sampling with zeros in p or q (filtered tokens)") {
  const std::vector<float> p = {0.0f, 0.5f, 0.0f, 0.3f, 0.2f, 0.0f};
  const std::vector<float> q = {0.4f, 0.0f, 0.3f, 0.3f, 0.0f, 0.0f};
  const int n = 100000;
  double acc = 0.0;
  const auto counts = run(p, q, false, 0, n, 777, &acc);
  CHECK(counts[0] == 0);
  CHECK(counts[2] == 0);
  CHECK(chi2(counts, p, n) < 13.8);  // 2 dof among the 3 possible tokens, p = 0.001
  CHECK(acc == doctest::Approx(0.30).epsilon(0.02));
}

TEST_CASE("a deterministic proposal (lookup) is accepted with probability p(x)") {
  const std::vector<float> p = {0.1f, 0.6f, 0.3f};
  const int n = 100000;
  double acc = 0.0;
  const auto counts = run(p, {}, true, 2, n, 4242, &acc);
  CHECK(chi2(counts, p, n) < 13.8);
  CHECK(acc == doctest::Approx(0.30).epsilon(0.02));
}

TEST_CASE("identical p and q always accept") {
  const std::vector<float> p = {0.2f, 0.3f, 0.5f};
  double acc = 0.0;
  run(p, p, false, 0, 10000, 1, &acc);
  CHECK(acc == 1.0);
}
