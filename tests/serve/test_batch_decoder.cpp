// Continuous batching: requests decoded together, joining and leaving at
// different steps, give exactly the tokens plain decoding gives each alone,
// greedy and seeded.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "engine/runtime/thread_pool.hpp"
#include "engine/serving/batch_decoder.hpp"
#include "engine/speculative/speculative.hpp"
#include "engine/synth/mkmodel.hpp"
#include "test_util.hpp"

using namespace epyctune::engine;
using namespace epyctune::engine::serving;
using epyctune::testing::TempDir;

namespace {

struct Req {
  std::vector<int32_t> prompt;
  int n_predict;
  sampling::SamplerParams sp;
  int32_t stop_at = -1;  // an "end of generation" token
};

std::vector<Req> requests(int vocab) {
  std::vector<Req> out;
  for (int i = 0; i < 9; ++i) {
    Req r;
    const int len = 1 + (i * 7) % 23;  // 1 .. 22 prompt tokens
    for (int k = 0; k < len; ++k) r.prompt.push_back((k * 31 + i * 97 + 3) % vocab);
    r.n_predict = 3 + (i * 5) % 17;
    if (i % 3 == 1) {
      r.sp.temperature = 0.8f;
      r.sp.top_k = 40;
      r.sp.seed = 1000 + uint64_t(i);
    }
    out.push_back(r);
  }
  out[4].n_predict = 0;
  return out;
}

// What Generator (the path `generate` runs, no draft) gives alone.
std::vector<int32_t> alone(LlamaModel& m, const Req& r) {
  speculative::SpecOptions so;
  so.null_logits_ok = true;
  if (r.stop_at >= 0) so.is_stop = [&](int32_t t) { return t == r.stop_at; };
  speculative::Generator g(m, nullptr, r.sp, so);
  return g.generate(r.prompt, r.n_predict, {});
}

// Feeds the requests to a decoder of `slots` slots as room frees up, with a
// small prefill budget so prompts spread over steps.
std::map<size_t, SlotResult> together(LlamaModel& m, const std::vector<Req>& reqs, int slots,
                                      int budget) {
  BatchDecoder d(m, slots, budget);
  std::map<uint64_t, size_t> index;
  std::map<size_t, SlotResult> out;
  size_t next = 0;
  int steps = 0;
  while (out.size() < reqs.size()) {
    while (next < reqs.size() && d.has_room()) {
      const Req& r = reqs[next];
      SlotRequest sr;
      sr.prompt = r.prompt;
      sr.n_predict = r.n_predict;
      sr.sampler = r.sp;
      const int32_t stop = r.stop_at;
      if (stop >= 0) sr.is_stop = [stop](int32_t t) { return t == stop; };
      index[d.add(std::move(sr))] = next++;
    }
    for (auto& res : d.step()) out[index.at(res.id)] = std::move(res);
    REQUIRE(++steps < 10000);
  }
  CHECK(d.active() == 0);
  return out;
}

}  // namespace

TEST_CASE("continuous batching gives each request its own tokens, greedy and seeded") {
  TempDir dir;
  const auto path = dir.path() / "m.gguf";
  WriteOptions o;
  o.quant = "q8_0";
  o.seed = 3;
  write_model(path, parse_shape("tiny"), o);
  auto pool = runtime::ThreadPool::unpinned(2);
  auto m = LlamaModel::load(path, pool);
  auto reqs = requests(m->n_vocab());
  // One request stops at an end-of-generation token it meets on the way.
  reqs[2].stop_at = alone(*m, reqs[2]).at(1);

  std::vector<std::vector<int32_t>> want;
  for (const auto& r : reqs) want.push_back(alone(*m, r));
  for (auto [slots, budget] : {std::pair{1, 256}, {2, 5}, {4, 3}, {16, 64}}) {
    CAPTURE(slots);
    auto got = together(*m, reqs, slots, budget);
    for (size_t i = 0; i < reqs.size(); ++i) {
      CAPTURE(i);
      CHECK(got[i].tokens == want[i]);
      CHECK(got[i].stats.generated == static_cast<int64_t>(want[i].size()));
    }
    CHECK(got[2].finish == SlotResult::Finish::stop);
    CHECK(got[0].finish == SlotResult::Finish::length);
    CHECK(got[4].tokens.empty());
  }
}

TEST_CASE("continuous batching: cancels, stops from the sink, and the context bound") {
  TempDir dir;
  const auto path = dir.path() / "m.gguf";
  WriteOptions o;
  o.quant = "q4_0";
  auto s = parse_shape("tiny");
  s.ctx = 24;
  write_model(path, s, o);
  auto pool = runtime::ThreadPool::unpinned(1);
  auto m = LlamaModel::load(path, pool);
  BatchDecoder d(*m, 3, 4);

  bool cancel = false;
  SlotRequest a;
  a.prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  a.n_predict = 100;
  a.cancelled = [&] { return cancel; };
  const auto ida = d.add(a);
  SlotRequest b;
  b.prompt = {5, 6};
  b.n_predict = 100;  // more than the context holds
  const auto idb = d.add(b);
  int seen = 0;
  SlotRequest c;
  c.prompt = {7};
  c.n_predict = 100;
  c.on_token = [&](int32_t) { return ++seen < 3; };
  const auto idc = d.add(c);
  CHECK_FALSE(d.has_room());
  CHECK_THROWS_AS(d.add(c), std::logic_error);

  // The first step: c (one prompt token) decodes; a, the oldest, takes the
  // prompt budget of 4; b's prompt waits.
  std::map<uint64_t, SlotResult> ended;
  for (auto& r : d.step()) ended[r.id] = std::move(r);
  auto st = d.states();
  REQUIRE(st.size() == 3);
  CHECK(st[0].busy);
  CHECK(st[0].id == ida);
  CHECK(st[0].prompt_tokens == 10);
  CHECK(st[0].prompt_done == 4);
  CHECK(st[0].cached == 4);
  CHECK(st[1].prompt_done == 0);
  CHECK(st[2].prompt_done == 1);
  CHECK(st[2].generated == 1);
  CHECK(st[2].cached == 1);
  for (int i = 0; i < 40 && ended.size() < 3; ++i) {
    if (i == 5) cancel = true;
    for (auto& r : d.step()) ended[r.id] = std::move(r);
  }
  REQUIRE(ended.size() == 3);
  CHECK(ended[ida].finish == SlotResult::Finish::cancelled);
  CHECK(ended[idc].finish == SlotResult::Finish::stop);
  CHECK(ended[idc].tokens.size() == 3);
  // The context bound: as Generator, until the cache is full.
  CHECK(ended[idb].finish == SlotResult::Finish::length);
  speculative::SpecOptions so;
  so.null_logits_ok = true;
  speculative::Generator g(*m, nullptr, {}, so);
  CHECK(ended[idb].tokens == g.generate(b.prompt, 100, {}));
  CHECK(d.active() == 0);
  for (const auto& s : d.states()) CHECK_FALSE(s.busy);

  // Bad prompts are refused before a slot is taken.
  SlotRequest bad;
  CHECK_THROWS_AS(d.add(bad), std::invalid_argument);
  bad.prompt = {m->n_vocab()};
  CHECK_THROWS_AS(d.add(bad), std::invalid_argument);
  bad.prompt.assign(25, 1);
  CHECK_THROWS_AS(d.add(bad), std::invalid_argument);
  CHECK(d.active() == 0);
}

TEST_CASE("prefix reuse: a request computes only what no free slot's cache holds") {
  TempDir dir;
  const auto path = dir.path() / "m.gguf";
  WriteOptions o;
  o.quant = "q8_0";
  write_model(path, parse_shape("tiny"), o);
  auto pool = runtime::ThreadPool::unpinned(2);
  auto m = LlamaModel::load(path, pool);
  const int V = m->n_vocab();
  BatchDecoder d(*m, 2, 8);
  auto run = [&](const Req& r) {
    SlotRequest sr;
    sr.prompt = r.prompt;
    sr.n_predict = r.n_predict;
    sr.sampler = r.sp;
    const auto id = d.add(std::move(sr));
    for (int i = 0; i < 1000; ++i)
      for (auto& res : d.step())
        if (res.id == id) return res;
    FAIL("the request did not end");
    return SlotResult{};
  };
  Req a;
  for (int k = 0; k < 20; ++k) a.prompt.push_back((k * 17 + 5) % V);
  a.n_predict = 8;
  const auto ra = run(a);
  CHECK(ra.reused_prompt_tokens == 0);
  CHECK(ra.tokens == alone(*m, a));

  // The next turn: A's prompt, A's answer, and a new question.
  Req b = a;
  b.prompt.insert(b.prompt.end(), ra.tokens.begin(), ra.tokens.end());
  for (int k = 0; k < 5; ++k) b.prompt.push_back((k * 29 + 3) % V);
  b.n_predict = 10;
  b.sp.temperature = 0.7f;
  b.sp.seed = 9;
  const auto rb = run(b);
  CHECK(rb.reused_prompt_tokens == 27);  // A's 20 + the 7 answer tokens it fed back
  CHECK(rb.tokens == alone(*m, b));

  // A shared start only: the slot with the longest common prefix is taken.
  Req c;
  c.prompt.assign(a.prompt.begin(), a.prompt.begin() + 10);
  for (int k = 0; k < 6; ++k) c.prompt.push_back((k * 41 + 7) % V);
  c.n_predict = 6;
  const auto rc = run(c);
  CHECK(rc.reused_prompt_tokens == 10);
  CHECK(rc.tokens == alone(*m, c));

  // The same prompt again: all but its last token come from the cache.
  const auto rc2 = run(c);
  CHECK(rc2.reused_prompt_tokens == static_cast<int64_t>(c.prompt.size()) - 1);
  CHECK(rc2.tokens == rc.tokens);
  auto st = d.states();
  CHECK(std::none_of(st.begin(), st.end(), [](const SlotState& s) { return s.busy; }));
}
