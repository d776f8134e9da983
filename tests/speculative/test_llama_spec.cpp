// Speculation over real (tiny, generated) llama models: greedy output must be
// the target's own, and --pair-of must write a smaller draft near the asked
// agreement.
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

namespace {
std::vector<int32_t> target_alone(LlamaModel& m, const std::vector<int32_t>& prompt, int n) {
  m.truncate(0);
  std::vector<float> row(static_cast<size_t>(m.n_vocab()));
  m.forward_last(prompt, row.data());
  std::vector<int32_t> out;
  for (;;) {
    const int32_t t = sampling::argmax(row);
    out.push_back(t);
    if (static_cast<int>(out.size()) == n) break;
    m.forward(std::span<const int32_t>(&t, 1), row.data());
  }
  return out;
}

struct Models {
  epyctune::testing::TempDir dir;
  std::filesystem::path target, draft;
  PairReport pair;
  Models() {
    target = dir.path() / "target.gguf";
    draft = dir.path() / "draft.gguf";
    ModelShape shape = parse_shape("tiny");
    shape.ctx = 256;
    write_model(target, shape, GgmlType::Q8_0, 11);
    auto pool = runtime::ThreadPool::unpinned(1);
    PairOptions po;
    po.agreement = 0.2;  // below the 1-layer copy's own agreement: bisection must add noise
    po.sequences = 8;
    po.steps = 16;
    pair = write_draft_pair(target, draft, po, pool);
  }
};
Models& models() {
  static Models m;
  return m;
}
}  // namespace

TEST_CASE("mkmodel --pair-of: a smaller draft near the requested agreement") {
  const auto& r = models().pair;
  CHECK(r.target_layers == 2);
  CHECK(r.draft_layers == 1);
  CHECK(r.draft_params < r.target_params);
  CHECK(r.copy_agreement > 0.2);  // the copy agrees more than asked, so noise was needed
  CHECK(r.noise_scale > 0.0);
  CHECK(r.calibration_agreement == doctest::Approx(0.2).epsilon(0.1 / 0.2));
  CHECK(r.holdout_samples == 4 * 16);
  auto pool = runtime::ThreadPool::unpinned(1);
  auto d = LlamaModel::load(models().draft, pool);
  CHECK(d->config().n_layers == 1);
  CHECK(d->n_vocab() == 512);
}

TEST_CASE("greedy speculation over llama models equals the target alone") {
  auto tpool = runtime::ThreadPool::unpinned(1);
  auto dpool = runtime::ThreadPool::unpinned(1);
  auto oracle = LlamaModel::load(models().target, tpool);
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 20, 30, 40}, {1, 7, 8, 9, 7, 8, 9, 7, 8}, {1, 300, 301, 302, 303, 304, 305, 306, 307}};
  for (const auto& prompt : prompts) {
    const auto expect = target_alone(*oracle, prompt, 24);
    for (int k : {1, 3, 8, 0}) {  // 0: adaptive, K up to 16
      for (int source = 0; source < 3; ++source) {
        for (auto mode : {speculative::SpecMode::shared, speculative::SpecMode::partitioned}) {
          CAPTURE(k);
          CAPTURE(source);
          CAPTURE(speculative::spec_mode_name(mode));
          auto target = LlamaModel::load(models().target, tpool);
          auto draft = LlamaModel::load(models().draft,
                                        mode == speculative::SpecMode::partitioned ? dpool : tpool);
          speculative::SpecOptions o;
          o.draft_len = k == 0 ? 16 : k;
          o.adaptive = k == 0;
          o.mode = mode;
          o.null_logits_ok = true;
          if (source >= 1) o.lookup = {2, 1};
          speculative::Generator g(*target, source == 1 ? nullptr : draft.get(), {}, o);
          CHECK(g.generate(prompt, 24) == expect);
          CHECK(g.stats().target_passes == 24 - g.stats().accepted);
        }
      }
    }
  }
}
