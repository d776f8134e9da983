// Speculation over qwen2 models (QKV biases, NeoX rope): a draft of the
// Qwen2.5-0.5B geometry paired to a qwen2 target by mkmodel --pair-of gives
// the target's own greedy output.
#include <doctest/doctest.h>

#include <vector>

#include "engine/model/llama_model.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/speculative/speculative.hpp"
#include "engine/synth/draft_pair.hpp"
#include "engine/synth/mkmodel.hpp"
#include "test_util.hpp"

using namespace epyctune::engine;

TEST_CASE("greedy speculation with a qwen2 0.5B-shape draft equals the qwen2 target alone") {
  epyctune::testing::TempDir dir;
  const auto target_path = dir.path() / "target.gguf";
  const auto draft_path = dir.path() / "draft.gguf";
  // Qwen2.5-0.5B's layer geometry (dim 896, 14 heads, 2 KV heads, ffn 4864),
  // 2 layers and a small vocabulary so that the test stays fast.
  ModelShape shape = parse_shape("qwen2.5-0.5b,layers=2,vocab=512,ctx=256");
  write_model(target_path, shape, GgmlType::Q8_0, 5);
  auto pool = runtime::ThreadPool::unpinned(2);
  PairOptions po;
  po.agreement = 1.0;  // the 1-layer copy as it is: no noise search
  po.draft_layers = 1;
  po.sequences = 2;
  po.steps = 8;
  const PairReport r = write_draft_pair(target_path, draft_path, po, pool);
  CHECK(r.draft_layers == 1);
  auto target = LlamaModel::load(target_path, pool);
  auto draft = LlamaModel::load(draft_path, pool);
  CHECK(draft->config().arch == Arch::qwen2);
  CHECK(draft->config().attn_qkv_bias);
  const std::vector<int32_t> prompt{1, 300, 301, 302, 17, 42};
  // Plain greedy decoding by the target.
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
    CHECK(g.stats().accepted > 0);  // the draft's layer copy does predict the target
  }
}
