#include "engine/speculative/ngram_lookup.hpp"

#include <algorithm>

namespace epyctune::engine::speculative {

std::optional<int32_t> ngram_lookup(std::span<const int32_t> ctx, const LookupOptions& opt) {
  if (!opt.enabled()) return std::nullopt;
  const int64_t size = static_cast<int64_t>(ctx.size());
  const int lo = std::max(1, opt.ngram_min);
  for (int n = opt.ngram_max; n >= lo; --n) {
    if (size < n + 1) continue;  // need the suffix plus at least one earlier token
    const int32_t* suffix = ctx.data() + (size - n);
    // Start j of an earlier occurrence, newest first; ctx[j + n] follows it
    // and must lie before the suffix's own end.
    for (int64_t j = size - n - 1; j >= 0; --j) {
      if (ctx[j] != suffix[0]) continue;
      if (std::equal(suffix, suffix + n, ctx.data() + j)) return ctx[j + n];
    }
  }
  return std::nullopt;
}

}  // namespace epyctune::engine::speculative
