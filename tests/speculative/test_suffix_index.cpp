// The whole-context n-gram index must give exactly what the reference scan
// (ngram_lookup) gives, however the context got there: appends, rollbacks,
// or a sync to an unrelated context.
#include <doctest/doctest.h>

#include <random>
#include <stdexcept>
#include <vector>

#include "engine/speculative/ngram_lookup.hpp"
#include "engine/speculative/suffix_index.hpp"

using namespace epyctune::engine::speculative;

namespace {
// The scan, iterated: what continuation(k) must return.
std::vector<int32_t> scan_continuation(std::vector<int32_t> ctx, const LookupOptions& o, int k) {
  std::vector<int32_t> out;
  while (static_cast<int>(out.size()) < k) {
    const auto t = ngram_lookup(ctx, o);
    if (!t) break;
    out.push_back(*t);
    ctx.push_back(*t);
  }
  return out;
}
}  // namespace

TEST_CASE("the index continues a span of the prompt from the generated text") {
  SuffixIndex ix(LookupOptions{4, 2});
  const std::vector<int32_t> prompt = {10, 11, 12, 13, 14, 15, 16, 17, 18};
  ix.sync(prompt);
  for (int32_t t : {40, 41, 12, 13}) ix.push(t);  // generated: "12 13" recurs
  CHECK(ix.continuation(5) == std::vector<int32_t>{14, 15, 16, 17, 18});
  CHECK(ix.text().size() == prompt.size() + 4);  // continuation leaves the text as it was
}

TEST_CASE("the index finds a span that only the generated text holds") {
  SuffixIndex ix(LookupOptions{3, 2});
  ix.sync(std::vector<int32_t>{1, 2, 3});
  for (int32_t t : {30, 31, 32, 33, 9, 30, 31}) ix.push(t);
  // "30 31" first appears in generated tokens; its newest follower is 32.
  CHECK(ix.continuation(3) == std::vector<int32_t>{32, 33, 9});
  // The newest occurrence wins over an older one of the same length.
  ix.sync(std::vector<int32_t>{7, 8, 1, 7, 8, 2, 7, 8});
  REQUIRE(ix.follower() >= 0);
  CHECK(ix.text()[static_cast<size_t>(ix.follower())] == 2);
}

TEST_CASE("no match, lookup off, and a too-long ngram_min give nothing") {
  SuffixIndex ix(LookupOptions{4, 3});
  ix.sync(std::vector<int32_t>{1, 2, 3, 4, 5, 1, 2});  // only a 2-gram recurs
  CHECK(ix.follower() == -1);
  CHECK(ix.continuation(4).empty());
  SuffixIndex off(LookupOptions{0, 1});
  off.sync(std::vector<int32_t>{1, 1, 1});
  CHECK(off.continuation(2).empty());
  const LookupOptions min_over_max{2, 3};
  CHECK_THROWS_AS(SuffixIndex{min_over_max}, std::invalid_argument);
}

TEST_CASE("incremental index == rescan on random sequences, rollbacks and syncs") {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 60; ++trial) {
    const int vocab = 2 + trial % 5;  // small vocabularies: many matches
    const LookupOptions o{1 + trial % 6, 1 + (trial / 6) % 3};
    if (o.ngram_min > o.ngram_max) continue;
    CAPTURE(trial);
    SuffixIndex ix(o);
    std::vector<int32_t> ref;
    for (int step = 0; step < 200; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 7) {
        ref.push_back(static_cast<int32_t>(rng() % static_cast<unsigned>(vocab)));
        ix.push(ref.back());
      } else if (op < 9) {
        ref.resize(ref.size() - std::min<size_t>(ref.size(), rng() % 6));
        ix.truncate(ref.size());
      } else {  // sync to a context sharing only a prefix
        ref.resize(ref.size() / 2);
        for (int i = 0; i < 5; ++i)
          ref.push_back(static_cast<int32_t>(rng() % static_cast<unsigned>(vocab)));
        ix.sync(ref);
      }
      REQUIRE(std::vector<int32_t>(ix.text().begin(), ix.text().end()) == ref);
      const auto want = ngram_lookup(ref, o);
      const int64_t f = ix.follower();
      REQUIRE(want.has_value() == (f >= 0));
      if (want) REQUIRE(ix.text()[static_cast<size_t>(f)] == *want);
      if (step % 10 == 0) REQUIRE(ix.continuation(6) == scan_continuation(ref, o, 6));
    }
  }
}
