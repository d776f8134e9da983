// Prompt / n-gram lookup drafting: find the most recent earlier occurrence of
// the context's last n tokens and propose the token that followed it. Free to
// compute and strong on text that repeats its input (code edits, quoting,
// summaries), so it is tried before the draft model in cascade. Drafting uses
// SuffixIndex (suffix_index.hpp), which gives the same answer incrementally;
// ngram_lookup is the scan that defines it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace epyctune::engine::speculative {

struct LookupOptions {
  int ngram_max = 0;  // 0 = lookup off; the longest suffix tried first
  int ngram_min = 1;  // shortest suffix accepted as a match
  bool enabled() const { return ngram_max > 0; }
};

// The token that followed the most recent earlier occurrence of the longest
// matching suffix of ctx (length ngram_max down to ngram_min), or nullopt.
// A function of ctx only, so a proposal never depends on how drafting was
// batched or timed.
std::optional<int32_t> ngram_lookup(std::span<const int32_t> ctx, const LookupOptions& opt);

}  // namespace epyctune::engine::speculative
