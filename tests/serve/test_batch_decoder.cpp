// Continuous batching: requests decoded together, joining and leaving at
// different steps, give exactly the tokens plain decoding gives each alone,
// greedy and seeded.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>

#include "engine/model/kv_pool.hpp"
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

BatchOptions options(int budget, speculative::LookupOptions lookup = {},
                     LlamaModel* draft = nullptr) {
  BatchOptions o;
  o.prefill_budget = budget;
  o.lookup = lookup;
  o.draft = draft;
  return o;
}

// Feeds the requests to a decoder of `slots` slots as room frees up, with a
// small prefill budget so prompts spread over steps.
int max_active = 0;  // the most requests together() had running at once

std::map<size_t, SlotResult> together(LlamaModel& m, const std::vector<Req>& reqs, int slots,
                                      int budget, speculative::LookupOptions lookup = {},
                                      LlamaModel* draft = nullptr) {
  max_active = 0;
  BatchDecoder d(m, slots, options(budget, lookup, draft));
  // Every proposal verified: which ones are does not hang on timing.
  d.set_draft_policy(DraftPolicy::fixed(0));
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
      // As the server: a request waits until its KV blocks can be reserved.
      const auto fit = d.fits(sr);
      REQUIRE(fit != BatchDecoder::Fit::never);
      if (fit == BatchDecoder::Fit::later) {
        REQUIRE(d.active() > 0);  // with nothing running everything fits
        break;
      }
      index[d.add(std::move(sr))] = next++;
      max_active = std::max(max_active, d.active());
    }
    for (auto& res : d.step()) out[index.at(res.id)] = std::move(res);
    REQUIRE(++steps < 10000);
  }
  CHECK(d.active() == 0);
  return out;
}

// Checks that every request got the tokens it gets alone, and sums its
// proposals (the draft model's, or the lookup's), which only ever save
// passes: passes + accepted = generated.
struct Drafting {
  int64_t drafted = 0, accepted = 0, passes = 0, generated = 0;
};
Drafting own_tokens(std::map<size_t, SlotResult>& got,
                    const std::vector<std::vector<int32_t>>& want, bool model) {
  Drafting t;
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    const auto& st = got[i].stats;
    CHECK(got[i].tokens == want[i]);
    CHECK((model ? st.lookup_drafted : st.model_drafted) == 0);
    t.drafted += model ? st.model_drafted : st.lookup_drafted;
    t.accepted += model ? st.model_accepted : st.lookup_accepted;
    t.passes += st.target_passes;
    t.generated += st.generated;
  }
  CHECK(t.accepted <= t.drafted);
  CHECK(t.passes + t.accepted == t.generated);
  return t;
}

// A generated tiny q8_0 model in a temporary directory, on a pool of its
// own with a KV pool of `contexts` contexts (ctx > 0: the model's context).
struct TinyModel {
  TempDir dir;
  runtime::ThreadPool pool;
  std::unique_ptr<LlamaModel> m;
  TinyModel(uint64_t seed, int threads, int contexts, int ctx = 0)
      : pool(runtime::ThreadPool::unpinned(threads)) {
    const auto path = dir.path() / "m.gguf";
    WriteOptions o;
    o.quant = "q8_0";
    o.seed = seed;
    auto shape = parse_shape("tiny");
    if (ctx > 0) shape.ctx = ctx;
    write_model(path, shape, o);
    ModelOptions mo;
    mo.kv_contexts = contexts;
    m = LlamaModel::load(path, pool, mo);
  }
};

}  // namespace

TEST_CASE("continuous batching gives each request its own tokens, greedy and seeded") {
  TinyModel tiny(3, 2, 16);
  auto& m = tiny.m;
  auto reqs = requests(m->n_vocab());
  // One request stops at an end-of-generation token it meets on the way.
  reqs[2].stop_at = alone(*m, reqs[2]).at(1);
  // 16 requests: the 9 and a second round of them, seeds moved.
  for (size_t i = 0; i < 7; ++i) {
    Req r = reqs[i];
    if (r.sp.temperature > 0) r.sp.seed += 500;
    r.prompt.push_back(int32_t(i + 1));
    reqs.push_back(r);
  }

  std::vector<std::vector<int32_t>> want;
  for (const auto& r : reqs) want.push_back(alone(*m, r));
  for (auto [slots, budget] : {std::pair{1, 256}, {2, 5}, {4, 3}, {8, 7}, {16, 64}}) {
    CAPTURE(slots);
    auto got = together(*m, reqs, slots, budget);
    CHECK(max_active == slots);
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

// Speculation under load: n-gram proposals verified in the batched pass
// beside the other requests' rows. On prompts that repeat themselves the
// lookup proposes often; every request must still get exactly the tokens
// plain decoding gives it alone, greedy and seeded, at every batch size.
TEST_CASE("n-gram proposals verified under load keep each request's own tokens") {
  TinyModel tiny(5, 2, 16);
  auto& m = tiny.m;
  std::vector<Req> reqs;
  for (int i = 0; i < 12; ++i) {
    Req r;
    // A phrase said three times, then its start again.
    std::vector<int32_t> phrase;
    for (int k = 0; k < 3 + i % 5; ++k) phrase.push_back((k * 13 + i * 29 + 7) % m->n_vocab());
    for (int rep = 0; rep < 3; ++rep) r.prompt.insert(r.prompt.end(), phrase.begin(), phrase.end());
    r.prompt.push_back(phrase[0]);
    r.n_predict = 20 + (i * 7) % 30;
    if (i % 4 == 3) {
      r.sp.temperature = 0.7f;
      r.sp.seed = 77 + uint64_t(i);
    }
    reqs.push_back(r);
  }
  reqs[5].stop_at = alone(*m, reqs[5]).at(6);
  std::vector<std::vector<int32_t>> want;
  for (const auto& r : reqs) want.push_back(alone(*m, r));
  const speculative::LookupOptions lookup{4, 1};
  for (int slots : {1, 2, 4, 12}) {
    CAPTURE(slots);
    auto got = together(*m, reqs, slots, 16, lookup);
    const auto [drafted, accepted, passes, generated] = own_tokens(got, want, false);
    CHECK(got[5].finish == SlotResult::Finish::stop);
    // The lookup drafted, and proposals were accepted.
    CHECK(drafted > 0);
    CHECK(accepted > 0);
    MESSAGE("slots " << slots << ": drafted " << drafted << ", accepted " << accepted << ", passes "
                     << passes << " for " << generated << " tokens");
  }
}

// A draft model under load: each request's draft sequence in the draft's
// own pool, its proposals verified beside the other requests' rows. The
// target as its own draft proposes its greedy tokens; another model of the
// same vocabulary, with a pool for two requests only, proposes poorly and
// for some requests not at all. Every request still gets its own tokens.
TEST_CASE("draft-model proposals verified under load keep each request's own tokens") {
  TinyModel tiny(5, 2, 16);
  LlamaModel& m = *tiny.m;
  ModelOptions mo;
  mo.kv_contexts = 16;
  auto same = LlamaModel::load(tiny.dir.path() / "m.gguf", tiny.pool, mo);
  TinyModel other(11, 2, 2);
  auto reqs = requests(m.n_vocab());
  for (auto& r : reqs) r.n_predict += 12;  // room for several rounds of proposals
  reqs[2].stop_at = alone(m, reqs[2]).at(9);
  std::vector<std::vector<int32_t>> want;
  for (const auto& r : reqs) want.push_back(alone(m, r));
  for (LlamaModel* draft : {same.get(), other.m.get()}) {
    for (int slots : {1, 3, 9}) {
      CAPTURE(slots);
      CAPTURE(draft == same.get());
      auto got = together(m, reqs, slots, 7, {}, draft);
      const auto [drafted, accepted, passes, generated] = own_tokens(got, want, true);
      CHECK(got[2].finish == SlotResult::Finish::stop);
      CHECK(drafted > 0);
      // Its own greedy tokens: a greedy request that runs its length
      // takes every proposal.
      for (size_t i = 0; i < reqs.size() && draft == same.get(); ++i) {
        if (reqs[i].sp.temperature > 0 || reqs[i].stop_at >= 0) continue;
        CAPTURE(i);
        CHECK(got[i].stats.model_drafted > 0);
        CHECK(got[i].stats.model_accepted == got[i].stats.model_drafted);
      }
      const std::string which = draft == same.get() ? " (same)" : " (other)";
      MESSAGE("slots " << slots << which << ": drafted " << drafted << ", accepted " << accepted
                       << ", passes " << passes << " for " << generated << " tokens");
    }
  }
  // /slots shows a running request's proposals verified and kept.
  BatchDecoder d(m, 2, options(64, {}, same.get()));
  d.set_draft_policy(DraftPolicy::fixed(0));
  SlotRequest r;
  r.prompt = reqs[0].prompt;  // one token: it decodes from the first step
  r.n_predict = 40;
  d.add(r);
  for (int i = 0; i < 4; ++i) d.step();
  const SlotState st = d.states()[0];
  REQUIRE(st.busy);
  CHECK(st.drafted > 0);
  CHECK(st.accepted == st.drafted);  // greedy, its own draft
  CHECK(st.generated == 4 + st.accepted);
}

// A prompt that arrives while a request decodes with proposals is read
// beside it, at the pacer's chunks: the pacer's timing passes (no prompt
// rows) carry no proposals, or it would wait for one forever.
TEST_CASE("a prompt arriving beside a request that drafts is read while it decodes") {
  TinyModel tiny(5, 1, 3, 1024);
  auto& m = tiny.m;
  BatchDecoder d(*m, 2, options(64, {4, 1}));
  d.set_draft_policy(DraftPolicy::fixed(0));
  // Every token of the vocabulary in its prompt: a's lookup always has a
  // proposal, so every pass without prompt rows would carry some.
  SlotRequest a;
  for (int32_t t = 0; t < m->n_vocab(); ++t) a.prompt.push_back(t);
  a.n_predict = 400;
  d.add(a);
  for (int i = 0; i < 12; ++i) d.step();  // a's prompt, then it decodes and drafts
  REQUIRE(d.states()[0].generated > 0);
  // Longer than 8 passes of the pacer's first chunk: a timing pass comes.
  SlotRequest b;
  for (int k = 0; k < 100; ++k) b.prompt.push_back((k * 7 + 1) % m->n_vocab());
  b.n_predict = 4;
  d.add(b);
  bool read = false;
  for (int i = 0; i < 60 && !read; ++i) {
    REQUIRE(d.step().empty());  // a is still decoding
    const auto st = d.states();
    read = st[1].prompt_done == st[1].prompt_tokens;
    CHECK(st[0].busy);
  }
  CHECK(read);
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
  ModelOptions mo;
  mo.kv_contexts = 3;
  auto m = LlamaModel::load(path, pool, mo);
  BatchDecoder d(*m, 3, options(4));

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

TEST_CASE("a KV budget for 2 requests: 4 submitted wait their turn and all complete") {
  TempDir dir;
  const auto path = dir.path() / "m.gguf";
  WriteOptions o;
  o.quant = "q8_0";
  write_model(path, parse_shape("tiny"), o);
  auto pool = runtime::ThreadPool::unpinned(2);
  auto reqs = requests(1);  // placeholder for the vocabulary below
  ModelOptions mo;
  mo.n_ctx = 48;  // 3 blocks a request at most: 6 blocks hold 2 of them
  mo.kv_tokens = 96;
  auto m = LlamaModel::load(path, pool, mo);
  reqs.clear();
  for (int i = 0; i < 4; ++i) {
    Req r;
    for (int k = 0; k < 20 + i; ++k) r.prompt.push_back((k * 13 + i * 7 + 1) % m->n_vocab());
    r.n_predict = 20;  // 40+ positions: 3 blocks each
    reqs.push_back(r);
  }
  std::vector<std::vector<int32_t>> want;
  for (const auto& r : reqs) want.push_back(alone(*m, r));
  CHECK(m->kv_pool().blocks_total() == 6);
  auto got = together(*m, reqs, 4, 16);
  CHECK(max_active == 2);  // four slots, memory for two
  for (size_t i = 0; i < reqs.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].finish == SlotResult::Finish::length);
    CHECK(got[i].tokens == want[i]);
  }
  // A request longer than the whole pool is refused, not queued forever.
  ModelOptions big = mo;
  big.n_ctx = 128;
  auto m2 = LlamaModel::load(path, pool, big);
  BatchDecoder d(*m2, 2, options(16));
  SlotRequest huge;
  huge.prompt.assign(100, 1);
  huge.n_predict = 10;
  CHECK(d.fits(huge) == BatchDecoder::Fit::now);  // its pool is one context: 8 blocks
  SlotRequest small;
  small.prompt.assign(10, 1);
  small.n_predict = 100;  // capped by the context: 8 blocks too
  d.add(small);
  CHECK(d.fits(huge) == BatchDecoder::Fit::later);
  CHECK_THROWS_AS(d.add(huge), std::logic_error);
  CHECK(d.active() == 1);
}

TEST_CASE("prefix reuse: full blocks of any slot's request, running or finished") {
  TempDir dir;
  const auto path = dir.path() / "m.gguf";
  WriteOptions o;
  o.quant = "q8_0";
  write_model(path, parse_shape("tiny"), o);
  auto pool = runtime::ThreadPool::unpinned(2);
  ModelOptions mo;
  mo.kv_contexts = 2;
  auto m = LlamaModel::load(path, pool, mo);
  auto ref = LlamaModel::load(path, pool);  // alone(), beside the decoder's pool
  const int V = m->n_vocab();
  BatchDecoder d(*m, 2, options(16));
  auto add = [&](const Req& r) {
    SlotRequest sr;
    sr.prompt = r.prompt;
    sr.n_predict = r.n_predict;
    sr.sampler = r.sp;
    return d.add(std::move(sr));
  };
  auto run_until = [&](uint64_t id) {
    for (int i = 0; i < 2000; ++i)
      for (auto& res : d.step())
        if (res.id == id) return res;
    FAIL("the request did not end");
    return SlotResult{};
  };
  auto slot_of = [&](uint64_t id) {
    for (const auto& s : d.states())
      if (s.busy && s.id == id) return s.slot;
    return -1;
  };
  // A: 3 full blocks and a tail, still decoding when B arrives.
  Req a;
  for (int k = 0; k < 52; ++k) a.prompt.push_back((k * 17 + 5) % V);
  a.n_predict = 40;
  const auto ida = add(a);
  for (int i = 0; i < 6; ++i) d.step();  // 52 prompt tokens at 16 a step: A decodes
  REQUIRE(d.states()[size_t(slot_of(ida))].generated > 0);

  // B: the same 3-block prefix, another tail, on the other slot while A runs.
  Req b;
  b.prompt.assign(a.prompt.begin(), a.prompt.begin() + 48);
  for (int k = 0; k < 9; ++k) b.prompt.push_back((k * 29 + 3) % V);
  b.n_predict = 6;
  b.sp.temperature = 0.7f;
  b.sp.seed = 9;
  const auto idb = add(b);
  CHECK(slot_of(idb) != slot_of(ida));
  const auto states = d.states();
  const auto& sa = states[size_t(slot_of(ida))];
  const auto& sb = states[size_t(slot_of(idb))];
  CHECK(sb.cached == 48);
  REQUIRE(sa.blocks.size() >= 4);
  CHECK(sb.blocks == std::vector<int>(sa.blocks.begin(), sa.blocks.begin() + 3));
  const auto rb = run_until(idb);
  CHECK(rb.reused_prompt_tokens == 48);  // only the 9-token tail was computed
  CHECK(rb.tokens == alone(*ref, b));    // as without reuse
  const auto ra = run_until(ida);
  CHECK(ra.reused_prompt_tokens == 0);
  CHECK(ra.tokens == alone(*ref, a));

  // Finished, A's blocks stay cached: the next turn (A's prompt and answer
  // and a question) maps every full block of them.
  Req c = a;
  c.prompt.insert(c.prompt.end(), ra.tokens.begin(), ra.tokens.end());
  for (int k = 0; k < 5; ++k) c.prompt.push_back((k * 41 + 7) % V);
  c.n_predict = 5;
  CHECK(d.kv().blocks_used == 0);
  CHECK(d.kv().blocks_cached > 0);
  const auto rc = run_until(add(c));
  CHECK(rc.reused_prompt_tokens == 80);  // 97 prompt tokens: 6 full blocks before the last
  CHECK(rc.tokens == alone(*ref, c));
  // The same prompt again: the same blocks.
  const auto rc2 = run_until(add(c));
  CHECK(rc2.reused_prompt_tokens == 96);  // c's own 6th block is in the pool now
  CHECK(rc2.tokens == rc.tokens);
}

TEST_CASE("prefix reuse under a small KV budget: cached blocks are evicted, nothing fails") {
  TempDir dir;
  const auto path = dir.path() / "m.gguf";
  WriteOptions o;
  o.quant = "q4_0";
  write_model(path, parse_shape("tiny"), o);
  auto pool = runtime::ThreadPool::unpinned(2);
  ModelOptions mo;
  mo.n_ctx = 64;  // one context: 4 blocks, the whole pool
  auto m = LlamaModel::load(path, pool, mo);
  const int V = m->n_vocab();
  std::vector<Req> reqs;
  for (int i = 0; i < 6; ++i) {
    Req r;
    // Pairs share a 2-block prefix; each pair's differs.
    for (int k = 0; k < 32; ++k) r.prompt.push_back((k * 7 + (i / 2) * 53 + 1) % V);
    for (int k = 0; k < 5; ++k) r.prompt.push_back((k * 11 + i * 3 + 2) % V);
    r.n_predict = 12;
    reqs.push_back(r);
  }
  std::vector<std::vector<int32_t>> want;
  for (const auto& r : reqs) want.push_back(alone(*m, r));
  auto got = together(*m, reqs, 2, 16);
  for (size_t i = 0; i < reqs.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].tokens == want[i]);
  }
  CHECK(m->kv_pool().evictions() > 0);
  int64_t reused = 0;
  for (const auto& [i, r] : got) reused += r.reused_prompt_tokens;
  CHECK(reused >= 32);  // the second of a pair, when its prefix was not evicted yet
}
