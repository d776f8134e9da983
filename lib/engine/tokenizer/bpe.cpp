// GPT-2 byte-level BPE as llama.cpp applies it: each pre-token is mapped to
// printable code points byte by byte, then the adjacent pair with the lowest
// merge rank (ties: leftmost) is merged until no listed merge applies.
#include <queue>

#include "engine/tokenizer/tokenizer_impl.hpp"
#include "engine/tokenizer/unicode.hpp"

namespace epyctune::engine {
namespace {

struct Symbol {
  int prev, next;
  size_t pos, n;  // byte range in the mapped word
};

struct Bigram {
  int left, right;
  int32_t rank;
  size_t size;
};

struct BigramGreater {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
  }
};

}  // namespace

void Tokenizer::Impl::encode_bpe(std::string_view text, std::vector<int32_t>& out) const {
  std::string word;
  std::string key;
  std::vector<Symbol> sym;
  for (std::string_view piece : pretokenize(text, pre)) {
    word.clear();
    for (char c : piece) word += unicode::byte_to_unicode(static_cast<uint8_t>(c));
    if (ignore_merges) {
      if (const int32_t id = find(word); id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    sym.clear();
    for (const auto& cp : unicode::decode_utf8(word)) {
      const int idx = static_cast<int>(sym.size());
      sym.push_back({idx - 1, idx + 1, cp.offset, cp.len});
    }
    if (sym.empty()) continue;
    sym.back().next = -1;
    std::priority_queue<Bigram, std::vector<Bigram>, BigramGreater> queue;
    auto try_add = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      key.assign(word, sym[l].pos, sym[l].n);
      key += ' ';
      key.append(word, sym[r].pos, sym[r].n);
      const auto it = merge_rank.find(key);
      if (it == merge_rank.end()) return;
      queue.push({l, r, it->second, sym[l].n + sym[r].n});
    };
    for (size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int>(i - 1), static_cast<int>(i));
    while (!queue.empty()) {
      const Bigram b = queue.top();
      queue.pop();
      auto& l = sym[b.left];
      auto& r = sym[b.right];
      // Symbols only grow or vanish, so an unchanged total size means unchanged sides.
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = b.left;
      try_add(l.prev, b.left);
      try_add(b.left, l.next);
    }
    for (int i = 0; i != -1; i = sym[i].next) {
      const std::string_view s(word.data() + sym[i].pos, sym[i].n);
      if (const int32_t id = find(s); id >= 0) {
        out.push_back(id);
        continue;
      }
      // Not a token after all merges: fall back to single-byte tokens, as llama.cpp does.
      for (char c : s)
        if (const int32_t id = find(std::string_view(&c, 1)); id >= 0) out.push_back(id);
    }
  }
}

}  // namespace epyctune::engine
