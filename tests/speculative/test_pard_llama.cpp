// PARD-style drafting over real (tiny, generated) llama models: the mask token
// comes from the draft's GGUF metadata, a missing key is a clear error, and
// greedy speculation with the parallel draft is still the target's output.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "engine/gguf/gguf.hpp"
#include "engine/model/llama_model.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/speculative/parallel_draft.hpp"
#include "engine/speculative/speculative.hpp"
#include "engine/synth/mkmodel.hpp"
#include "test_util.hpp"

using namespace epyctune::engine;

TEST_CASE("a PARD draft's mask token is read from its metadata; greedy output is the target's") {
  epyctune::testing::TempDir dir;
  ModelShape shape = parse_shape("tiny");
  shape.ctx = 256;
  const auto target_path = dir.path() / "target.gguf";
  const auto pard_path = dir.path() / "pard.gguf";
  write_model(target_path, shape, GgmlType::Q8_0, 11);
  WriteOptions wo;
  wo.quant = "q8_0";
  wo.seed = 12;
  wo.threads = 1;
  wo.extra_u32.emplace_back(speculative::PARD_MASK_KEY, static_cast<uint32_t>(shape.vocab - 1));
  write_model(pard_path, shape, wo);

  auto plain_file = gguf::File::open(target_path);
  CHECK_FALSE(speculative::pard_mask_token(*plain_file).has_value());
  try {
    speculative::require_pard_mask_token(*plain_file);
    FAIL("a draft without the key was accepted");
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    CHECK(msg.find(target_path.string()) != std::string::npos);
    CHECK(msg.find(speculative::PARD_MASK_KEY) != std::string::npos);
    CHECK(msg.find("--pard") != std::string::npos);
  }

  auto pool = runtime::ThreadPool::unpinned(1);
  auto target = LlamaModel::load(target_path, pool);
  auto oracle = LlamaModel::load(target_path, pool);
  auto inner = LlamaModel::load(pard_path, pool);
  const auto mask = speculative::require_pard_mask_token(inner->file());
  CHECK(mask == shape.vocab - 1);
  speculative::ParallelDraftModel pard(*inner, mask);

  const std::vector<int32_t> prompt = {1, 7, 8, 9, 7, 8, 9, 7, 8};
  speculative::SpecOptions plain;
  plain.draft_len = 0;
  const auto expect = speculative::Generator(*oracle, nullptr, {}, plain).generate(prompt, 24);
  for (int k : {1, 4, 16}) {
    for (auto mode : {speculative::SpecMode::shared, speculative::SpecMode::partitioned}) {
      CAPTURE(k);
      speculative::SpecOptions o;
      o.draft_len = k;
      o.mode = mode;
      o.null_logits_ok = true;
      speculative::Generator g(*target, &pard, {}, o);
      CHECK(g.generate(prompt, 24) == expect);
      // One draft pass per round (plus the prompt's), not one per token
      // (the pipelined thread also drafts chains it later discards).
      if (mode == speculative::SpecMode::shared)
        CHECK(g.stats().draft_passes <= g.stats().target_passes + 1);
    }
  }
}
