// Parallel (PARD-style) drafting: k proposals from one pass over
// [.., last, mask x (k - 1)], and speculation with it (and with lookup over
// the whole context) still giving exactly the target's greedy output.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "engine/sampling/sampler.hpp"
#include "engine/speculative/drafter.hpp"
#include "engine/speculative/parallel_draft.hpp"
#include "engine/speculative/speculative.hpp"
#include "speculative/toy_lm.hpp"

using namespace epyctune::engine;
using epyctune::testing::ToyLM;

namespace {
constexpr int kVocab = 16, kCtx = 256, kMask = 15;

std::vector<int32_t> plain(const std::vector<int32_t>& prompt, int n) {
  ToyLM m(kVocab, kCtx);
  speculative::SpecOptions o;
  o.draft_len = 0;
  speculative::Generator g(m, nullptr, {}, o);
  return g.generate(prompt, n);
}

// The greedy token a fresh pass over ctx + mask x masks predicts last.
int32_t single_pass(const std::vector<int32_t>& ctx, int masks) {
  ToyLM m(kVocab, kCtx, 4.0f, 1.5f);
  std::vector<int32_t> in = ctx;
  in.insert(in.end(), static_cast<size_t>(masks), kMask);
  std::vector<float> logits(in.size() * kVocab);
  m.forward(in, logits.data());
  return sampling::argmax(std::span<const float>(logits.data() + (in.size() - 1) * kVocab, kVocab));
}
}  // namespace

TEST_CASE("a parallel draft's k-at-once proposals equal its single passes over the masked input") {
  ToyLM inner(kVocab, kCtx, 4.0f, 1.5f);
  speculative::ParallelDraftModel draft(inner, kMask);
  speculative::Drafter d(&draft, {}, {}, 8);
  REQUIRE(d.parallel());
  std::vector<int32_t> ctx = {1, 5, 9, 2, 7};
  for (int k = 1; k <= 16; ++k) {
    CAPTURE(k);
    const int64_t passes = d.model_passes();
    const auto props = d.propose(ctx, k);
    REQUIRE(props.size() == static_cast<size_t>(k));
    CHECK(d.model_passes() - passes == 1);  // the uncached tokens and k - 1 masks in ONE pass
    for (int i = 0; i < k; ++i) CHECK(props[static_cast<size_t>(i)].token == single_pass(ctx, i));
    CHECK(draft.pos() == static_cast<int>(ctx.size()));  // the masks were rolled back out
    ctx.push_back(props.front().token);                  // the next round starts one further
  }
  auto outside_vocab = [&] { speculative::ParallelDraftModel m(inner, kVocab); };
  CHECK_THROWS_AS(outside_vocab(), std::invalid_argument);
}

TEST_CASE("greedy speculation is the target's output for lookup, cascade and a parallel draft") {
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 5, 9, 2, 7}, {2, 11, 12, 13, 14, 2, 11, 12, 13, 0, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6}};
  const int n = 40;
  for (const auto& prompt : prompts) {
    const auto expect = plain(prompt, n);
    for (int k = 1; k <= 16; ++k) {
      for (int source = 0; source < 4; ++source) {  // lookup, cascade, parallel, parallel cascade
        for (auto mode : {speculative::SpecMode::shared, speculative::SpecMode::partitioned}) {
          CAPTURE(k);
          CAPTURE(source);
          CAPTURE(speculative::spec_mode_name(mode));
          ToyLM target(kVocab, kCtx);
          ToyLM inner(kVocab, kCtx, 4.0f, 1.5f);
          speculative::ParallelDraftModel pard(inner, kMask);
          CausalLM* draft = nullptr;
          if (source == 1) draft = &inner;
          if (source >= 2) draft = &pard;
          speculative::SpecOptions o;
          o.draft_len = k;
          o.mode = mode;
          o.max_batch = 16;
          if (source != 2) o.lookup = {4, 1};
          speculative::Generator g(target, draft, {}, o);
          CHECK(g.generate(prompt, n) == expect);
          const auto& st = g.stats();
          CHECK(st.target_passes == n - st.accepted);
          if (source == 0) CHECK(st.model_drafted == 0);
        }
      }
    }
  }
}
