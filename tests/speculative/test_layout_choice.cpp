// Auto's layout, chosen per run from the acceptance its rounds show: a draft
// that is nearly always right drafts on its own side while the target
// verifies; one that is often wrong drafts time-shared on every CPU. The
// costs here are made up so that each layout wins at one acceptance.
#include <doctest/doctest.h>

#include <vector>

#include "engine/sampling/sampler.hpp"
#include "engine/speculative/mode_choice.hpp"
#include "engine/speculative/speculative.hpp"
#include "speculative/toy_lm.hpp"

using namespace epyctune::engine;
using epyctune::testing::ToyLM;

namespace {
// Every CPU: a cheap verify and a draft pass of 0.15. The partition: the
// verify side alone is half as fast, the draft's side drafts at 0.2 a token
// while it verifies, and plain passes run on every CPU (the hand-back).
// Predicted at acceptance 1.0: 4.72 tok/s partitioned against 4.05 shared;
// at 0.5: 1.25 shared against 1.0.
speculative::LayoutCosts made_up_costs() {
  speculative::LayoutCosts c;
  c.shared.target.n = {1, 17};
  c.shared.target.s = {1.0, 1.8};
  c.shared.draft_s = 0.15;
  c.shared.measured = true;
  c.partitioned.target.n = {1, 17};
  c.partitioned.target.s = {2.0, 3.6};
  c.partitioned.draft_s = 0.2;
  c.partitioned.overlap = true;
  c.partitioned.handback_plain_s = 1.0;
  c.partitioned.measured = true;
  return c;
}

std::vector<int32_t> target_alone(ToyLM& m, const std::vector<int32_t>& prompt, int n) {
  m.truncate(0);
  std::vector<float> logits(static_cast<size_t>(m.n_vocab()) * prompt.size());
  m.forward(prompt, logits.data());
  std::vector<float> row(logits.end() - m.n_vocab(), logits.end());
  std::vector<int32_t> out;
  while (static_cast<int>(out.size()) < n) {
    const int32_t t = sampling::argmax(row);
    out.push_back(t);
    m.forward(std::span<const int32_t>(&t, 1), row.data());
  }
  return out;
}
// Partitioned and adaptive, recording set_layout's calls (true = both
// models onto every CPU).
speculative::SpecOptions partitioned_options(std::vector<bool>& moves) {
  speculative::SpecOptions o;
  o.draft_len = 16;
  o.adaptive = true;
  // A toy model's passes take microseconds, so its timings say nothing: the
  // controller drafts whatever they say, and the layout alone is tested.
  o.adaptive_opt.margin = 0.0;
  o.mode = speculative::SpecMode::partitioned;
  o.set_layout = [&moves](bool every) { moves.push_back(every); };
  return o;
}
}  // namespace

TEST_CASE("LayoutChooser: the layout follows the acceptance, after a few rounds, by a margin") {
  const auto costs = made_up_costs();
  using LC = speculative::LayoutChooser;
  LC ch(costs, 16, 0.5);
  CHECK(ch.shared());
  CHECK_FALSE(ch.current().overlap);
  for (int i = 1; i < LC::kRoundsPerDecision; ++i) CHECK_FALSE(ch.observe_round(1.0, 0, 0.0, true));
  CHECK(ch.observe_round(1.0, 0, 0.0, true));  // enough rounds: the partition predicts more
  CHECK_FALSE(ch.shared());
  CHECK(ch.current().overlap);
  CHECK(ch.last().partitioned_rate > LC::kMargin * ch.last().shared_rate);
  for (int i = 0; i < 3 * LC::kRoundsPerDecision; ++i)
    CHECK_FALSE(ch.observe_round(1.0, 0, 0.0, true));
  for (int i = 1; i < LC::kRoundsPerDecision; ++i) CHECK_FALSE(ch.observe_round(0.5, 0, 0.0, true));
  CHECK(ch.observe_round(0.5, 0, 0.0, true));
  CHECK(ch.shared());
  CHECK(ch.switches() == 2);

  // Starting where the other layout wins by less than the margin: no move.
  speculative::LayoutCosts close = costs;
  close.partitioned.target.s = {1.0, 1.8};  // as fast as every CPU, and drafting overlapped
  close.partitioned.draft_s = 0.0;
  close.shared.draft_s = 0.0;
  LC tie(close, 16, 1.0);
  CHECK_FALSE(tie.shared());  // a tie keeps the partition
  for (int i = 0; i < 2 * LC::kRoundsPerDecision; ++i)
    CHECK_FALSE(tie.observe_round(1.0, 0, 0.0, true));
}

TEST_CASE("LayoutChooser: a layout that runs slower than predicted is left, and not retried") {
  using LC = speculative::LayoutChooser;
  LC ch(made_up_costs(), 16, 0.5);
  REQUIRE(ch.shared());
  // Shared at acceptance 1.0 achieves its prediction (4.05 tok/s): 81
  // tokens in 20 s; the partition predicts 4.72, so the run moves.
  for (int i = 1; i < LC::kRoundsPerDecision; ++i)
    CHECK_FALSE(ch.observe_round(1.0, 20, 5.0, true));
  CHECK(ch.observe_round(1.0, 21, 5.0, true));
  REQUIRE_FALSE(ch.shared());
  CHECK(ch.factors().shared == doctest::Approx(81.0 / 20.0 / ch.last().shared_rate).epsilon(0.01));
  // There the draft and the verify slow each other: 2 tok/s, not 4.72.
  for (int i = 1; i < LC::kRoundsPerDecision; ++i)
    CHECK_FALSE(ch.observe_round(1.0, 10, 5.0, true));
  CHECK(ch.observe_round(1.0, 10, 5.0, true));
  CHECK(ch.shared());
  CHECK(ch.factors().partitioned_seen);
  CHECK(ch.factors().partitioned < 0.5);
  // Back on every CPU at its predicted rate: no move back, however long.
  for (int i = 0; i < 5 * LC::kRoundsPerDecision; ++i)
    CHECK_FALSE(ch.observe_round(1.0, 20, 20.0 / 4.05, true));
  CHECK(ch.switches() == 2);
  // Plain rounds count toward the window's rate, not toward its rounds.
  for (int i = 0; i < 10; ++i) CHECK_FALSE(ch.observe_round(1.0, 1, 0.2, false));
  // A later run that starts with these factors starts shared at once.
  LC next(made_up_costs(), 16, 1.0, ch.factors());
  CHECK(next.shared());
}

TEST_CASE("a run starts time-shared and moves onto the partition once the draft proves right") {
  ToyLM oracle(16, 512);
  const std::vector<int32_t> prompt = {1, 2, 3};
  const auto expect = target_alone(oracle, prompt, 200);
  ToyLM target(16, 512), draft(16, 512);  // the draft is the target: every proposal holds
  std::vector<bool> moves;
  auto o = partitioned_options(moves);
  o.layouts = made_up_costs();
  o.layout_accept = 0.3;  // the last run's draft was poor: start time-shared
  speculative::Generator g(target, &draft, {}, o);
  CHECK(g.generate(prompt, 200) == expect);
  const auto& st = g.stats();
  CHECK(st.accepted == st.drafted);
  // The first move is the acceptance's; a toy's passes take microseconds,
  // so what its rounds measure may move it again.
  CHECK(st.layout_switches >= 1);
  CHECK(st.shared_rounds >= speculative::LayoutChooser::kRoundsPerDecision);
  CHECK(st.every_cpu_passes - st.shared_rounds <= 1);  // the last token's round may be plain
  CHECK(st.target_passes > st.every_cpu_passes);       // the rest verified on the verify side
  REQUIRE(moves.size() >= 2);
  CHECK(moves.front());       // onto every CPU for the first round
  CHECK_FALSE(moves[1]);      // then back on the sides for the partitioned rounds
  CHECK_FALSE(moves.back());  // and there at the end
}

TEST_CASE("without layouts, a partitioned run moves only for its plain rounds") {
  ToyLM oracle(16, 512);
  const std::vector<int32_t> prompt = {1, 2, 3};
  const auto expect = target_alone(oracle, prompt, 120);
  ToyLM target(16, 512), draft(16, 512);
  std::vector<bool> moves;
  auto o = partitioned_options(moves);
  speculative::Generator g(target, &draft, {}, o);
  CHECK(g.generate(prompt, 120) == expect);
  CHECK(g.stats().shared_rounds == 0);
  CHECK(g.stats().layout_switches == 0);
  CHECK(moves.empty());  // a perfect draft never decodes plain
}
