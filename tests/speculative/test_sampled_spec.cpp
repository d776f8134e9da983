// Sampled speculation: the generated tokens must follow the target's own
// distribution (checked end to end by chi-square over many seeds), and a fixed
// seed must give the same tokens in every schedule.
#include <doctest/doctest.h>

#include <vector>

#include "engine/sampling/sampler.hpp"
#include "engine/speculative/speculative.hpp"
#include "speculative/toy_lm.hpp"

using namespace epyctune::engine;
using epyctune::testing::ToyLM;

namespace {
sampling::SamplerParams params(uint64_t seed) {
  sampling::SamplerParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 3;  // filtered tokens put zeros into both p and q
  sp.seed = seed;
  return sp;
}

// The target's exact next-token distribution after ctx.
std::vector<float> exact(int vocab, const std::vector<int32_t>& ctx,
                         const sampling::SamplerParams& sp) {
  ToyLM m(vocab, 64, 2.0f);
  std::vector<float> logits(static_cast<size_t>(vocab) * ctx.size()), p;
  m.forward(ctx, logits.data());
  sampling::probabilities(
      std::span<const float>(logits.data() + (ctx.size() - 1) * vocab, static_cast<size_t>(vocab)),
      sp, p);
  return p;
}

// Chi-square of the joint distribution of the first two generated tokens.
double joint_chi2(const std::vector<int32_t>& prompt, bool use_draft, int lookup, int k, int n) {
  const int vocab = 4;
  std::vector<int> counts(vocab * vocab, 0);
  for (int s = 0; s < n; ++s) {
    ToyLM target(vocab, 64, 2.0f), draft(vocab, 64, 2.0f, 2.0f);
    speculative::SpecOptions o;
    o.draft_len = k;
    o.lookup = {lookup, 1};
    speculative::Generator g(target, use_draft ? &draft : nullptr, params(1000 + s), o);
    const auto out = g.generate(prompt, 2);
    REQUIRE(out.size() == 2);
    ++counts[out[0] * vocab + out[1]];
  }
  const auto p0 = exact(vocab, prompt, params(0));
  double chi2 = 0.0;
  for (int a = 0; a < vocab; ++a) {
    auto ctx = prompt;
    ctx.push_back(a);
    const auto p1 = exact(vocab, ctx, params(0));
    for (int b = 0; b < vocab; ++b) {
      const double e = n * double(p0[a]) * double(p1[b]);
      const int c = counts[a * vocab + b];
      if (e == 0.0) {
        CHECK(c == 0);  // a filtered-out token was generated
        continue;
      }
      chi2 += (c - e) * (c - e) / e;
    }
  }
  return chi2;
}
}  // namespace

TEST_CASE("sampled speculation with a draft model follows the target's distribution") {
  // top-k 3 of 4 leaves 9 possible pairs: 8 degrees of freedom, p = 0.001 -> 26.1.
  CHECK(joint_chi2({1, 2, 3}, true, 0, 3, 4000) < 26.1);
}

TEST_CASE("sampled speculation with lookup (one-hot proposals) follows the target's distribution") {
  CHECK(joint_chi2({1, 2, 1, 2, 1, 2, 1}, false, 2, 3, 4000) < 26.1);
}

TEST_CASE("sampled speculation in cascade follows the target's distribution") {
  CHECK(joint_chi2({3, 1, 3, 1, 0, 3}, true, 2, 2, 3000) < 26.1);
}

TEST_CASE("a fixed seed gives the same tokens in every schedule and draft length") {
  const std::vector<int32_t> prompt = {1, 4, 2, 8, 5, 7};
  auto run = [&](int k, speculative::SpecMode mode, bool use_draft, int lookup, uint64_t seed) {
    ToyLM target(16, 128, 3.0f), draft(16, 128, 3.0f, 1.0f);
    speculative::SpecOptions o;
    o.draft_len = k;
    o.mode = mode;
    o.lookup = {lookup, 1};
    speculative::Generator g(target, use_draft ? &draft : nullptr, params(seed), o);
    return g.generate(prompt, 40);
  };
  const auto a = run(4, speculative::SpecMode::shared, true, 0, 5);
  CHECK(a.size() == 40);
  CHECK(run(4, speculative::SpecMode::shared, true, 0, 5) == a);
  CHECK(run(4, speculative::SpecMode::partitioned, true, 0, 5) == a);
  CHECK(run(4, speculative::SpecMode::partitioned, true, 2, 5) ==
        run(4, speculative::SpecMode::shared, true, 2, 5));
  CHECK(run(4, speculative::SpecMode::shared, true, 0, 6) != a);

  // Without proposals every token is the target's own draw, so K = 0 equals a
  // plain Sampler loop over the target.
  ToyLM plain(16, 128, 3.0f);
  sampling::Sampler s(params(5));
  std::vector<float> logits(16 * prompt.size());
  plain.forward(prompt, logits.data());
  std::vector<int32_t> expect;
  std::vector<float> row(logits.end() - 16, logits.end());
  for (int i = 0; i < 40; ++i) {
    const int32_t t = s.sample(row, static_cast<int64_t>(prompt.size()) + i);
    expect.push_back(t);
    plain.forward(std::span<const int32_t>(&t, 1), row.data());
  }
  CHECK(run(0, speculative::SpecMode::shared, false, 0, 5) == expect);
}
