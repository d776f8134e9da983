// Speculation over gpt-oss models (sinks, sliding window, routed experts):
// the greedy output with a draft equals the target's alone, across the
// window, for several draft lengths.
#include <doctest/doctest.h>

#include <vector>

#include "engine/model/llama_model.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/speculative/speculative.hpp"
#include "engine/synth/mkmodel.hpp"
#include "test_util.hpp"

using namespace epyctune::engine;

TEST_CASE("greedy speculation on a gpt-oss pair equals the gpt-oss target alone") {
  epyctune::testing::TempDir dir;
  const auto target_path = dir.path() / "target.gguf";
  const auto draft_path = dir.path() / "draft.gguf";
  // Window 8, so that 30 tokens cross it in the target's even layers; the
  // draft is the target's first layer (the seeded weights are keyed by
  // tensor name, and the same seed gives the same vocabulary).
  const std::string shape = "tiny,arch=gpt-oss,swa=8,rope_factor=4,rope_orig_ctx=64,layers=";
  write_model(target_path, parse_shape(shape + "3"), GgmlType::Q8_0, 5);
  write_model(draft_path, parse_shape(shape + "1"), GgmlType::Q8_0, 5);
  auto pool = runtime::ThreadPool::unpinned(2);
  auto target = LlamaModel::load(target_path, pool);
  const std::vector<int32_t> prompt{1, 300, 301, 302, 17, 42};
  constexpr size_t kN = 30;
  std::vector<float> row(static_cast<size_t>(target->n_vocab()));
  target->forward_last(prompt, row.data());
  std::vector<int32_t> expect;
  while (expect.size() < kN) {
    const int32_t t = sampling::argmax(row);
    expect.push_back(t);
    if (expect.size() < kN) target->forward(std::span<const int32_t>(&t, 1), row.data());
  }
  for (int k : {1, 3, 6}) {
    CAPTURE(k);
    auto t2 = LlamaModel::load(target_path, pool);
    auto d2 = LlamaModel::load(draft_path, pool);
    speculative::SpecOptions o;
    o.draft_len = k;
    o.null_logits_ok = true;
    speculative::Generator g(*t2, d2.get(), {}, o);
    CHECK(g.generate(prompt, static_cast<int>(kN)) == expect);
  }
}
