// GPT-2 byte-level BPE as llama.cpp applies it: each pre-token is mapped to
// printable code points byte by byte, then the adjacent pair with the lowest
// merge rank (ties: leftmost) is merged until no listed merge applies.
#include <functional>
#include <optional>

#include "engine/tokenizer/merge.hpp"
#include "engine/tokenizer/tokenizer_impl.hpp"
#include "engine/tokenizer/unicode.hpp"

namespace epyctune::engine {

void Tokenizer::Impl::encode_bpe(std::string_view text, std::vector<int32_t>& out) const {
  std::string word;
  std::string key;
  std::vector<size_t> lengths;
  for (std::string_view piece : pretokenize(text, pre)) {
    word.clear();
    for (char c : piece) word += unicode::byte_to_unicode(static_cast<uint8_t>(c));
    if (ignore_merges) {
      if (const int32_t id = find(word); id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    lengths.clear();
    for (const auto& cp : unicode::decode_utf8(word)) lengths.push_back(cp.len);
    std::vector<MergeSymbol> sym = link_symbols(lengths);
    // Lowest merge rank first.
    const int first = merge_symbols<int32_t>(
        sym,
        [&](const std::vector<MergeSymbol>& s, int l, int r) -> std::optional<int32_t> {
          key.assign(word, s[l].pos, s[l].n);
          key += ' ';
          key.append(word, s[r].pos, s[r].n);
          const auto it = merge_rank.find(key);
          if (it == merge_rank.end()) return std::nullopt;
          return it->second;
        },
        std::less<int32_t>{});
    for (int i = first; i != -1; i = sym[i].next) {
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
