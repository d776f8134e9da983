// An n-gram index over the whole drafting context (prompt and generated
// tokens), kept in step with the context by appending and rolling back only
// the tokens that changed, so a proposal costs O(ngram_max) hash look-ups
// instead of a scan of the context.
//
// The proposal rule is the one ngram_lookup's scan defines (the token that
// followed the most recent earlier occurrence of the longest suffix of length
// ngram_max..ngram_min), iterated: each proposed token is appended before the
// next is looked up. Following one long match therefore copies the span after
// it, and the result stays a function of the context alone however the
// proposals are batched, which the pipelined feed relies on.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/speculative/ngram_lookup.hpp"

namespace epyctune::engine::speculative {

class SuffixIndex {
 public:
  explicit SuffixIndex(LookupOptions opt);
  bool enabled() const { return opt_.enabled(); }
  // Makes the indexed text equal to ctx: keeps the longest common prefix,
  // rolls back the rest and appends ctx's new tail.
  void sync(std::span<const int32_t> ctx);
  void push(int32_t token);
  void truncate(size_t n);
  std::span<const int32_t> text() const { return text_; }
  // Index in text() of the token to propose next, or -1 without a match.
  int64_t follower() const;
  // Up to k proposals continuing text(); text() is unchanged afterwards.
  std::vector<int32_t> continuation(int k);

 private:
  int width() const { return opt_.ngram_max - lo_ + 1; }
  // Hashes of text()[end - n, end) for n = lo_..ngram_max (fewer near the start).
  void keys_ending_at(size_t end, std::vector<uint64_t>& out) const;
  bool same(int64_t a_end, int64_t b_end, int n) const;

  LookupOptions opt_;
  int lo_ = 1;
  std::vector<int32_t> text_;
  // heads_[n - lo_]: n-gram hash -> index of the token that followed its most
  // recent occurrence. prev_[p * width() + n - lo_]: what that entry held before
  // position p was pushed (-1 none, -2 nothing was inserted), for rollback.
  std::vector<std::unordered_map<uint64_t, int32_t>> heads_;
  std::vector<int32_t> prev_;
  mutable std::vector<uint64_t> keys_;
};

}  // namespace epyctune::engine::speculative
