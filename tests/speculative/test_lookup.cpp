#include <doctest/doctest.h>

#include <vector>

#include "engine/speculative/ngram_lookup.hpp"

using namespace epyctune::engine::speculative;

TEST_CASE("lookup proposes what followed the most recent match of the suffix") {
  LookupOptions o{3, 1};
  // ... 5 6 7 8 ... 5 6 7 9 ... 6 7 -> the newest "6 7" was followed by 9.
  std::vector<int32_t> ctx = {1, 5, 6, 7, 8, 2, 5, 6, 7, 9, 3, 6, 7};
  CHECK(ngram_lookup(ctx, o) == 9);
  std::vector<int32_t> ctx2 = {5, 6, 7, 8, 1, 6, 7, 4, 5, 6, 7};
  CHECK(ngram_lookup(ctx2, o) == 8);  // 3-gram "5 6 7" beats the newer 2-gram "6 7"->4
}

TEST_CASE("lookup respects ngram_min and returns nothing without a match") {
  std::vector<int32_t> ctx = {1, 2, 3, 4, 2};
  CHECK(ngram_lookup(ctx, LookupOptions{2, 1}) == 3);
  CHECK_FALSE(ngram_lookup(ctx, LookupOptions{2, 2}).has_value());
  CHECK_FALSE(ngram_lookup(ctx, LookupOptions{0, 1}).has_value());  // off
  std::vector<int32_t> none = {1, 2, 3};
  CHECK_FALSE(ngram_lookup(none, LookupOptions{3, 1}).has_value());
  std::vector<int32_t> tiny = {4};
  CHECK_FALSE(ngram_lookup(tiny, LookupOptions{3, 1}).has_value());
}

TEST_CASE("lookup continues a run of one repeated token") {
  std::vector<int32_t> ctx = {9, 9, 9};
  CHECK(ngram_lookup(ctx, LookupOptions{2, 1}) == 9);
}
