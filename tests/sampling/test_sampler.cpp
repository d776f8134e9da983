#include <doctest/doctest.h>

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "common/field_error.hpp"
#include "engine/sampling/sampler.hpp"

using namespace epyctune::engine::sampling;

namespace {
double sum(const std::vector<float>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0);
}
int nonzero(const std::vector<float>& v) {
  int n = 0;
  for (float x : v) n += x > 0.0f;
  return n;
}
const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 0.5f, 3.0f, -1.0f};
}  // namespace

TEST_CASE("argmax: lowest index wins ties, NaN never wins") {
  CHECK(argmax(kLogits) == 1);
  std::vector<float> l = {NAN, 1.0f, NAN, 2.0f};
  CHECK(argmax(l) == 3);
}

TEST_CASE("greedy parameters give a one-hot distribution") {
  std::vector<float> p;
  probabilities(kLogits, SamplerParams{}, p);
  CHECK(p.size() == kLogits.size());
  CHECK(p[1] == 1.0f);
  CHECK(nonzero(p) == 1);
}

TEST_CASE("temperature: softmax of logits / T") {
  SamplerParams sp;
  sp.temperature = 2.0f;
  std::vector<float> p;
  probabilities(kLogits, sp, p);
  double z = 0.0;
  for (float l : kLogits) z += std::exp(l / 2.0);
  for (size_t i = 0; i < p.size(); ++i)
    CHECK(p[i] == doctest::Approx(std::exp(kLogits[i] / 2.0) / z));
  // Lower temperature sharpens.
  sp.temperature = 0.5f;
  std::vector<float> sharp;
  probabilities(kLogits, sp, sharp);
  CHECK(sharp[1] > p[1]);
  CHECK(sharp[5] < p[5]);
}

TEST_CASE("top-k keeps the k most likely, ties broken by index") {
  SamplerParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 2;
  std::vector<float> p;
  probabilities(kLogits, sp, p);
  CHECK(nonzero(p) == 2);
  CHECK(p[1] == doctest::Approx(0.5));
  CHECK(p[4] == doctest::Approx(0.5));
  CHECK(sum(p) == doctest::Approx(1.0));
  sp.top_k = 1;
  probabilities(kLogits, sp, p);
  CHECK(p[1] == 1.0f);  // tie 1 vs 4: lower index
}

TEST_CASE("top-p keeps the smallest prefix reaching the mass") {
  SamplerParams sp;
  sp.temperature = 1.0f;
  std::vector<float> full;
  probabilities(kLogits, sp, full);
  sp.top_p = 0.6f;  // the two 3.0 logits hold ~0.6 of the mass together
  std::vector<float> p;
  probabilities(kLogits, sp, p);
  const double two = full[1] + full[4];
  CHECK(nonzero(p) == (two >= 0.6 ? 2 : 3));
  CHECK(sum(p) == doctest::Approx(1.0));
  sp.top_p = 1e-6f;
  probabilities(kLogits, sp, p);
  CHECK(nonzero(p) == 1);
}

TEST_CASE("min-p drops tokens below min_p times the best") {
  SamplerParams sp;
  sp.temperature = 1.0f;
  sp.min_p = 0.3f;  // exp(2-3)=0.37 stays, exp(1-3)=0.135 goes
  std::vector<float> p;
  probabilities(kLogits, sp, p);
  CHECK(nonzero(p) == 3);
  CHECK(p[2] > 0.0f);
  CHECK(p[0] == 0.0f);
  CHECK(sum(p) == doctest::Approx(1.0));
}

TEST_CASE("sample_from: inverse CDF, never a zero-probability token") {
  std::vector<float> p = {0.0f, 0.25f, 0.0f, 0.75f};
  CHECK(sample_from(p, 0.0) == 1);
  CHECK(sample_from(p, 0.2499) == 1);
  CHECK(sample_from(p, 0.25) == 3);
  CHECK(sample_from(p, 0.9999999) == 3);
  std::vector<float> zero = {0.0f, 0.0f};
  CHECK_THROWS_AS(sample_from(zero, 0.5), std::invalid_argument);
}

TEST_CASE("Sampler draws match the distribution (chi-square)") {
  SamplerParams sp;
  sp.temperature = 1.0f;
  sp.seed = 99;
  Sampler s(sp);
  std::vector<float> p;
  probabilities(kLogits, sp, p);
  std::vector<int> counts(kLogits.size(), 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(s.sample(kLogits, i))];
  double chi2 = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = n * p[i];
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  CHECK(chi2 < 20.5);  // 5 degrees of freedom, p = 0.001
}

TEST_CASE("Sampler is deterministic for a seed and position") {
  SamplerParams sp;
  sp.temperature = 0.8f;
  sp.top_k = 4;
  sp.seed = 3;
  Sampler a(sp), b(sp);
  std::vector<int> x, y;
  for (int i = 0; i < 200; ++i) {
    x.push_back(a.sample(kLogits, i));
    y.push_back(b.sample(kLogits, i));
  }
  CHECK(x == y);
  sp.seed = 4;
  Sampler c(sp);
  std::vector<int> z;
  for (int i = 0; i < 200; ++i) z.push_back(c.sample(kLogits, i));
  CHECK(z != x);
}

TEST_CASE("validate names the bad field") {
  auto field_of = [](const SamplerParams& sp) -> std::string {
    try {
      sp.validate();
    } catch (const epyctune::common::FieldError& e) {
      return e.field();
    }
    return "";
  };
  SamplerParams sp;
  sp.top_p = 0.0f;
  CHECK(field_of(sp) == "top_p");
  sp = {};
  sp.min_p = 1.0f;
  CHECK(field_of(sp) == "min_p");
  sp = {};
  sp.top_k = -1;
  CHECK(field_of(sp) == "top_k");
  CHECK(field_of(SamplerParams{}).empty());
}
