// Speculation over deepseek2 models (latent attention, shared and routed
// experts): a 1-layer draft that is the target's first layer gives the
// target's own greedy output, with a verify pass of several tokens through
// the MoE layers' grouping by expert.
#include <doctest/doctest.h>

#include <vector>

#include "engine/model/llama_model.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/speculative/speculative.hpp"
#include "engine/synth/mkmodel.hpp"
#include "test_util.hpp"

using namespace epyctune::engine;

TEST_CASE("greedy speculation on deepseek2 equals the deepseek2 target alone") {
  epyctune::testing::TempDir dir;
  const auto target_path = dir.path() / "target.gguf";
  const auto draft_path = dir.path() / "draft.gguf";
  // mkmodel seeds each tensor by its name: the 1-layer draft is exactly the
  // target's layer 0 (dense), embedding and head.
  const std::string spec =
      "deepseek-v2-lite,dim=256,heads=4,ffn=512,vocab=512,ctx=256,experts=8,experts_used=3,"
      "expert_ffn=128,kv_lora=64,qk_nope=32,qk_rope=16,v_head=32,layers=";
  write_model(target_path, parse_shape(spec + "3"), GgmlType::Q8_0, 5);
  write_model(draft_path, parse_shape(spec + "1"), GgmlType::Q8_0, 5);
  auto pool = runtime::ThreadPool::unpinned(2);
  auto target = LlamaModel::load(target_path, pool);
  const std::vector<int32_t> prompt{1, 300, 301, 302, 17, 42};
  std::vector<float> row(static_cast<size_t>(target->n_vocab()));
  target->forward_last(prompt, row.data());
  std::vector<int32_t> expect;
  while (expect.size() < 20) {
    const int32_t t = sampling::argmax(row);
    expect.push_back(t);
    if (expect.size() < 20) target->forward(std::span<const int32_t>(&t, 1), row.data());
  }
  for (int k : {1, 4}) {
    CAPTURE(k);
    auto t2 = LlamaModel::load(target_path, pool);
    auto d2 = LlamaModel::load(draft_path, pool);
    speculative::SpecOptions o;
    o.draft_len = k;
    o.null_logits_ok = true;
    speculative::Generator g(*t2, d2.get(), {}, o);
    CHECK(g.generate(prompt, 20) == expect);
  }
}
