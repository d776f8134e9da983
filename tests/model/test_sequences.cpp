// Several sequences in one pass (forward_rows): each row attends to its own
// sequence's cache, and its logits are bit for bit those of the sequence run
// alone, whatever runs beside it. Serving many users rests on this.
#include <doctest/doctest.h>

#include <map>
#include <stdexcept>

#include "model_fixture.hpp"

using namespace epyctune::engine;
using namespace epyctune::testing;

namespace {

std::vector<int32_t> stream(int seed, int n, int vocab) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + seed * 101 + 11) % vocab);
  return t;
}

// One sequence's planned rows, step by step: how many tokens it adds at each
// step (0: idle or not yet arrived).
struct Plan {
  int seed;
  std::vector<int> per_step;
};

// Runs the plans together through forward_rows on one model, and each alone
// through forward() on another; every row's logits must match.
void check_together_equals_alone(const std::filesystem::path& path, const std::vector<Plan>& plans,
                                 int threads = 2) {
  auto pool = runtime::ThreadPool::unpinned(threads);
  auto together = LlamaModel::load(path, pool);
  auto alone = LlamaModel::load(path, pool);
  const int V = together->n_vocab();
  size_t steps = 0;
  for (const auto& p : plans) steps = std::max(steps, p.per_step.size());

  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<std::vector<int32_t>> toks;
  std::vector<size_t> used(plans.size(), 0);
  std::vector<std::vector<float>> got(plans.size());  // each sequence's logits, in order
  for (const auto& p : plans) {
    int total = 0;
    for (int n : p.per_step) total += n;
    toks.push_back(stream(p.seed, total, V));
    seqs.push_back(together->new_sequence());
  }
  for (size_t step = 0; step < steps; ++step) {
    std::vector<SeqRow> rows;
    std::vector<size_t> owner;
    for (size_t i = 0; i < plans.size(); ++i) {
      const int n = step < plans[i].per_step.size() ? plans[i].per_step[step] : 0;
      for (int k = 0; k < n; ++k) {
        rows.push_back({seqs[i].get(), toks[i][used[i]++]});
        owner.push_back(i);
      }
    }
    if (rows.empty()) continue;
    std::vector<float> logits(rows.size() * size_t(V));
    together->forward_rows(rows, logits.data());
    for (size_t r = 0; r < rows.size(); ++r)
      got[owner[r]].insert(got[owner[r]].end(), logits.begin() + long(r * V),
                           logits.begin() + long((r + 1) * V));
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    CAPTURE(i);
    CHECK(seqs[i]->pos() == static_cast<int>(toks[i].size()));
    alone->truncate(0);
    std::vector<float> want(toks[i].size() * size_t(V));
    alone->forward(toks[i], want.data());
    REQUIRE(got[i].size() == want.size());
    CHECK(bit_equal(got[i].data(), want.data(), want.size()));
  }
}

// Prompts of different lengths prefilled together, a late arrival, decode
// steps of one row each, a multi-row (verify-like) step beside single rows,
// and sequences that stop early.
const std::vector<Plan> kMix = {
    {1, {7, 1, 1, 1, 4, 1, 1, 1}},
    {2, {3, 1, 1, 0, 1, 1}},
    {3, {0, 0, 12, 1, 1, 1, 3, 1}},
    {4, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
};

}  // namespace

TEST_CASE("rows of several sequences give each sequence's own logits, bit for bit") {
  TempDir dir;
  struct Case {
    const char* shape;
    const char* quant;
  };
  for (Case cs : {Case{"tiny", "q4_0"}, Case{"tiny", "q8_0"},
                  Case{"dim=256,layers=2,heads=4,kv_heads=2,ffn=512,vocab=300,ctx=64", "q4_k_m"},
                  Case{"tiny,arch=qwen2", "q8_0"}, Case{"tiny,arch=qwen3,head_dim=32", "q4_0"},
                  Case{"tiny,arch=qwen3moe,experts=8,experts_used=3,expert_ffn=64", "q8_0"}}) {
    CAPTURE(cs.shape);
    check_together_equals_alone(make_model(dir, cs.shape, cs.quant), kMix);
  }
}

TEST_CASE("several sequences: latent attention (deepseek2) and a sliding window with sinks") {
  TempDir dir;
  const char* lite =
      "deepseek-v2-lite,layers=2,dim=256,heads=4,ffn=512,vocab=512,ctx=256,experts=8,"
      "experts_used=3,expert_ffn=128,kv_lora=64,qk_nope=32,qk_rope=16,v_head=32";
  check_together_equals_alone(make_model(dir, lite, "q8_0"), kMix);
  // Past the window: one sequence goes long while the others stay short.
  std::vector<Plan> long_one = kMix;
  long_one[0].per_step = {40, 1, 1, 1, 5, 1, 1, 1};
  check_together_equals_alone(
      make_model(dir, "tiny,arch=gpt-oss,rope_factor=4,rope_orig_ctx=64", "q8_0"), long_one);
}

TEST_CASE("several sequences on one thread and in chunks past max_batch") {
  TempDir dir;
  const auto path = make_model(dir, "tiny", "q4_0");
  check_together_equals_alone(path, kMix, 1);
  // max_batch 64 by default: 70 prompt rows of four sequences in one call.
  check_together_equals_alone(path, {{5, {30, 1}}, {6, {20, 1}}, {7, {15, 2}}, {8, {5, 1}}});
}

TEST_CASE("forward_rows refuses split sequences, bad tokens and overflow, moving nothing") {
  TempDir dir;
  auto pool = runtime::ThreadPool::unpinned(1);
  auto m = LlamaModel::load(make_model(dir, "tiny", "q4_0"), pool);
  auto a = m->new_sequence(), b = m->new_sequence();
  std::vector<SeqRow> ok{{a.get(), 1}, {a.get(), 2}, {b.get(), 3}};
  m->forward_rows(ok, nullptr);
  CHECK(a->pos() == 2);
  CHECK(b->pos() == 1);
  CHECK(m->pos() == 0);  // the default sequence is not touched

  std::vector<SeqRow> split{{a.get(), 1}, {b.get(), 2}, {a.get(), 3}};
  CHECK_THROWS_AS(m->forward_rows(split, nullptr), std::invalid_argument);
  std::vector<SeqRow> none{{nullptr, 1}};
  CHECK_THROWS_AS(m->forward_rows(none, nullptr), std::invalid_argument);
  std::vector<SeqRow> bad{{a.get(), 1}, {b.get(), m->n_vocab()}};
  CHECK_THROWS_AS(m->forward_rows(bad, nullptr), std::out_of_range);
  std::vector<SeqRow> full(size_t(m->n_ctx()), SeqRow{b.get(), 1});  // b holds 1 already
  full.insert(full.begin(), SeqRow{a.get(), 1});
  CHECK_THROWS_AS(m->forward_rows(full, nullptr), std::out_of_range);
  CHECK(a->pos() == 2);
  CHECK(b->pos() == 1);

  // Truncating one sequence leaves the other's cache alone.
  a->truncate(1);
  CHECK(a->pos() == 1);
  CHECK(b->pos() == 1);
  CHECK_THROWS_AS(a->truncate(-1), std::out_of_range);
  CHECK(a->kv_bytes() > 0);
}

TEST_CASE("forward_rows writes logits only for the rows that ask for them") {
  TempDir dir;
  auto pool = runtime::ThreadPool::unpinned(2);
  const auto path = make_model(dir, "tiny", "q8_0");
  auto m = LlamaModel::load(path, pool);
  const int V = m->n_vocab();
  auto a = m->new_sequence(), b = m->new_sequence(), c = m->new_sequence(), d = m->new_sequence();
  std::vector<SeqRow> all, some;
  for (int i = 0; i < 9; ++i) {
    all.push_back({i < 5 ? a.get() : b.get(), (i * 13 + 1) % V});
    some.push_back({i < 5 ? c.get() : d.get(), (i * 13 + 1) % V, i == 4 || i == 8 || i == 2});
  }
  std::vector<float> la(all.size() * size_t(V)), ls(3 * size_t(V), -1.0f);
  m->forward_rows(all, la.data());
  m->forward_rows(some, ls.data());
  CHECK(bit_equal(ls.data(), la.data() + 2 * V, size_t(V)));
  CHECK(bit_equal(ls.data() + V, la.data() + 4 * V, size_t(V)));
  CHECK(bit_equal(ls.data() + 2 * V, la.data() + 8 * V, size_t(V)));
  CHECK(c->pos() == 5);
  CHECK(d->pos() == 4);
}
