// The merge loop that BPE and SPM share: the text's symbols form a linked
// list of byte ranges, and the best adjacent pair in the queue (ties: the
// leftmost) merges, its neighbours' pairs are queued, until none is left.
// What makes a pair mergeable and how pairs rank is the caller's policy:
// BPE ranks by merge list position (lower first), SPM by the merged token's
// score (higher first).
#pragma once

#include <cstddef>
#include <optional>
#include <queue>
#include <vector>

namespace epyctune::engine {

struct MergeSymbol {
  int prev, next;  // neighbours in the list; -1 at either end
  size_t pos, n;   // byte range in the text; n == 0 once merged into its left
};

// Symbols for consecutive ranges of the given lengths, linked in order.
inline std::vector<MergeSymbol> link_symbols(const std::vector<size_t>& lengths) {
  std::vector<MergeSymbol> sym;
  sym.reserve(lengths.size());
  size_t pos = 0;
  for (size_t n : lengths) {
    const int idx = static_cast<int>(sym.size());
    sym.push_back({idx - 1, idx + 1, pos, n});
    pos += n;
  }
  if (!sym.empty()) sym.back().next = -1;
  return sym;
}

// score(sym, left, right) -> std::optional<Score>: the pair's priority, or
// nullopt when the two may not merge. better(a, b): a ranks strictly first.
// Returns the index of the first symbol (-1 when there is none); follow
// .next from there for the merged symbols.
template <class Score, class ScoreFn, class Better>
int merge_symbols(std::vector<MergeSymbol>& sym, ScoreFn score, Better better) {
  struct Bigram {
    int left, right;
    Score score;
    size_t size;
  };
  struct Worse {
    Better better;
    bool operator()(const Bigram& l, const Bigram& r) const {
      return better(r.score, l.score) || (l.score == r.score && l.left > r.left);
    }
  };
  std::vector<Bigram> storage;
  storage.reserve(sym.size());
  std::priority_queue<Bigram, std::vector<Bigram>, Worse> queue(Worse{better}, std::move(storage));
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    if (const std::optional<Score> s = score(sym, l, r))
      queue.push({l, r, *s, sym[l].n + sym[r].n});
  };
  for (size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int>(i - 1), static_cast<int>(i));
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    auto& l = sym[b.left];
    auto& r = sym[b.right];
    // Stale entry: symbols only grow or vanish, so an unchanged total size
    // means both sides are as they were queued.
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  return sym.empty() ? -1 : 0;
}

}  // namespace epyctune::engine
