// Greedy speculation must give exactly the target's own tokens, whatever the
// draft source, K, or schedule.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/field_error.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/speculative/speculative.hpp"
#include "speculative/toy_lm.hpp"

using namespace epyctune::engine;
using epyctune::testing::ToyLM;

namespace {
// The oracle: plain one-token-at-a-time greedy decoding of the target.
std::vector<int32_t> target_alone(ToyLM& m, const std::vector<int32_t>& prompt, int n,
                                  int eos = -1) {
  m.truncate(0);
  std::vector<float> logits(static_cast<size_t>(m.n_vocab()) * prompt.size());
  m.forward(prompt, logits.data());
  std::vector<int32_t> out;
  std::span<const float> last(logits.data() + (prompt.size() - 1) * m.n_vocab(),
                              static_cast<size_t>(m.n_vocab()));
  std::vector<float> row(static_cast<size_t>(m.n_vocab()));
  int32_t t = sampling::argmax(last);
  for (;;) {
    out.push_back(t);
    if (t == eos || static_cast<int>(out.size()) == n || m.pos() == m.n_ctx()) break;
    m.forward(std::span<const int32_t>(&t, 1), row.data());
    t = sampling::argmax(row);
  }
  return out;
}

const std::vector<std::vector<int32_t>> kPrompts = {
    {1},
    {1, 5, 9, 2, 7},
    {1, 3, 4, 3, 4, 3, 4, 3, 4, 8, 3, 4},  // repetitive: lookup gets matches
    {2, 11, 12, 13, 14, 15, 2, 11, 12, 13, 0, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
     6, 6,  6,  6,  6,  6,  6, 6,  6,  6,  6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6},  // longer than
                                                                                    // max_batch
                                                                                    // below
};
}  // namespace

TEST_CASE("greedy speculation is token-for-token the target's output") {
  const int vocab = 16, n_ctx = 256, n = 40;
  ToyLM oracle(vocab, n_ctx);
  for (const auto& prompt : kPrompts) {
    const auto expect = target_alone(oracle, prompt, n);
    REQUIRE(expect.size() == static_cast<size_t>(n));
    // K 1..16 fixed, then 17: adaptive with K up to 16.
    for (int k = 1; k <= 17; ++k) {
      for (int source = 0; source < 3; ++source) {  // 0 draft, 1 lookup, 2 cascade
        for (auto mode : {speculative::SpecMode::shared, speculative::SpecMode::partitioned}) {
          CAPTURE(prompt.size());
          CAPTURE(k);
          CAPTURE(source);
          CAPTURE(speculative::spec_mode_name(mode));
          ToyLM target(vocab, n_ctx);
          ToyLM draft(vocab, n_ctx, 4.0f, 1.5f);  // agrees part of the time
          speculative::SpecOptions o;
          o.draft_len = std::min(k, 16);
          o.adaptive = k == 17;
          o.mode = mode;
          o.max_batch = 16;
          o.null_logits_ok = k % 2 == 0;
          if (source >= 1) o.lookup = {3, 1};
          speculative::Generator g(target, source == 1 ? nullptr : &draft, {}, o);
          std::vector<int32_t> streamed;
          const auto got = g.generate(prompt, n, [&](int32_t t) {
            streamed.push_back(t);
            return true;
          });
          CHECK(got == expect);
          CHECK(streamed == got);
          const auto& st = g.stats();
          CHECK(st.generated == n);
          CHECK(st.accepted <= st.drafted);
          CHECK(st.target_passes == n - st.accepted);  // each pass: accepted + 1 own token
          CHECK(st.lookup_drafted + st.model_drafted == st.drafted);
          if (source == 1) CHECK(st.model_drafted == 0);
          if (source == 0) CHECK(st.lookup_drafted == 0);
        }
      }
    }
  }
}

TEST_CASE("a draft identical to the target is always accepted") {
  ToyLM target(32, 128), draft(32, 128);
  speculative::SpecOptions o;
  o.draft_len = 4;
  speculative::Generator g(target, &draft, {}, o);
  const auto got = g.generate(std::vector<int32_t>{1, 2, 3}, 30);
  CHECK(got.size() == 30);
  CHECK(g.stats().acceptance_rate() == 1.0);
  // 30 tokens in passes of 5 (4 accepted + 1 own); the last pass drafts fewer
  // so nothing is generated past n.
  CHECK(g.stats().target_passes == 6);
  CHECK(g.stats().mean_accepted() == doctest::Approx(24.0 / 6.0));
}

TEST_CASE("speculation stops at eos and at the end of the target's context") {
  ToyLM oracle(16, 64);
  const std::vector<int32_t> prompt = {1, 2, 3};
  const auto plain = target_alone(oracle, prompt, 30);
  const int32_t eos = plain[10];
  size_t first = 0;
  while (plain[first] != eos) ++first;
  const auto expect_eos = target_alone(oracle, prompt, 30, eos);
  CHECK(expect_eos.size() == first + 1);
  for (auto mode : {speculative::SpecMode::shared, speculative::SpecMode::partitioned}) {
    ToyLM target(16, 64), draft(16, 64, 4.0f, 0.5f);
    speculative::SpecOptions o;
    o.draft_len = 5;
    o.is_stop = [eos](int32_t t) { return t == eos; };
    o.mode = mode;
    speculative::Generator g(target, &draft, {}, o);
    CHECK(g.generate(prompt, 30) == expect_eos);

    // Context of 20 with a 3-token prompt: the target can emit 18 tokens
    // (the last token at position 19 is never fed).
    ToyLM small_oracle(16, 20), small_target(16, 20), small_draft(16, 20, 4.0f, 0.5f);
    const auto expect_ctx = target_alone(small_oracle, prompt, 100);
    o.is_stop = nullptr;
    speculative::Generator g2(small_target, &small_draft, {}, o);
    const auto got = g2.generate(prompt, 100);
    CHECK(got.size() == 18);
    CHECK(got == expect_ctx);
  }
}

TEST_CASE("drafts shorter than draft_min are dropped, not verified") {
  const std::vector<int32_t> prompt = {1, 2, 3};
  ToyLM oracle(16, 256);
  const auto expect = target_alone(oracle, prompt, 32);
  auto run = [&](int draft_ctx, int min, int n) {
    ToyLM target(16, 256), draft(16, draft_ctx);  // the draft always agrees
    speculative::SpecOptions o;
    o.draft_len = 4;
    o.draft_min = min;
    speculative::Generator g(target, &draft, {}, o);
    const auto got = g.generate(prompt, n);
    CHECK(std::equal(got.begin(), got.end(), expect.begin()));
    return g.stats();
  };
  // 32 tokens: six passes of 4 drafts + 1, then 2 tokens left. draft_min 0
  // verifies a 1-token draft; draft_min 3 decodes the last 2 alone.
  CHECK(run(256, 0, 32).target_passes == 7);
  CHECK(run(256, 3, 32).target_passes == 8);
  CHECK(run(256, 3, 32).dropped == 0);  // nothing drafted, so nothing dropped
  // A draft context of 20: with 18 tokens of history the draft can propose
  // only 3 (up to position 20), then 2, then 1, all below draft_min 4.
  const auto short_ctx = run(20, 4, 32);
  CHECK(short_ctx.dropped == 3 + 2 + 1);
  CHECK(short_ctx.accepted == short_ctx.drafted);
  CHECK(run(20, 0, 32).dropped == 0);

  ToyLM target(16, 64);
  speculative::SpecOptions bad;
  bad.draft_len = 2;
  bad.draft_min = 3;
  CHECK_THROWS_WITH_AS(speculative::Generator(target, nullptr, {}, bad),
                       doctest::Contains("between 0 and the longest draft"),
                       epyctune::common::FieldError);
}

TEST_CASE("the callback can stop generation early") {
  ToyLM target(16, 128), draft(16, 128, 4.0f, 0.5f);
  speculative::SpecOptions o;
  o.draft_len = 4;
  speculative::Generator g(target, &draft, {}, o);
  int seen = 0;
  const auto got = g.generate(std::vector<int32_t>{1}, 50, [&](int32_t) { return ++seen < 7; });
  CHECK(got.size() == 7);
}

TEST_CASE("bad inputs are rejected with a reason") {
  ToyLM target(16, 8), draft(17, 8);
  CHECK_THROWS_WITH_AS(speculative::Generator(target, &draft, {}, {}),
                       doctest::Contains("vocabulary"), std::invalid_argument);
  speculative::Generator g(target, nullptr, {}, {});
  CHECK_THROWS_WITH_AS(g.generate(std::vector<int32_t>{}, 4), doctest::Contains("empty prompt"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(g.generate(std::vector<int32_t>(9, 1), 4), doctest::Contains("exceeds"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(g.generate(std::vector<int32_t>{99}, 4), doctest::Contains("outside"),
                       std::invalid_argument);
}

TEST_CASE("adaptive drafting stops drafting a useless draft, with the target's output") {
  // A draft that agrees with the target about one time in 16 (chance).
  ToyLM oracle(16, 512);
  const std::vector<int32_t> prompt = {1, 2, 3};
  const auto expect = target_alone(oracle, prompt, 300);
  for (auto mode : {speculative::SpecMode::shared, speculative::SpecMode::partitioned}) {
    ToyLM target(16, 512), draft(16, 512, 0.0f, 50.0f, 99);
    speculative::SpecOptions o;
    o.draft_len = 16;
    o.adaptive = true;
    o.mode = mode;
    speculative::Generator g(target, &draft, {}, o);
    CHECK(g.generate(prompt, 300) == expect);
    const auto& ks = g.stats().k_trace;
    REQUIRE(ks.size() > 100);
    const auto drafting = std::count_if(ks.begin() + 20, ks.end(), [](int k) { return k > 0; });
    CHECK(drafting <= 8);  // probes only
    CHECK(g.stats().pos_tried.size() == 16);
  }
}
