// SentencePiece-style encoding as llama.cpp's SPM tokenizer does it: start
// from UTF-8 characters, repeatedly merge the adjacent pair whose
// concatenation is the highest-scoring vocabulary token (ties: leftmost), then
// emit each symbol, falling back to <0xXX> byte tokens.
#include <algorithm>
#include <functional>
#include <optional>

#include "engine/tokenizer/merge.hpp"
#include "engine/tokenizer/tokenizer_impl.hpp"

namespace epyctune::engine {
namespace {

// Length of a UTF-8 sequence from its first byte, as llama.cpp counts it
// (a stray continuation byte is a 1-byte symbol); keeps splits identical.
size_t utf8_len(char c) {
  static const size_t lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[static_cast<uint8_t>(c) >> 4];
}

// llama.cpp re-splits a non-token symbol along its merge history, but a
// merge only ever forms a vocabulary token, so a symbol that is not a token
// is a single character: it falls back to its bytes.
void resegment(const Tokenizer::Impl& v, std::string_view text, std::vector<int32_t>& out) {
  if (const int32_t id = v.find(text); id >= 0) {
    out.push_back(id);
    return;
  }
  for (char c : text) {
    const int32_t b = v.byte_token[static_cast<uint8_t>(c)];
    if (b >= 0)
      out.push_back(b);
    else if (v.unk >= 0)
      out.push_back(v.unk);
  }
}

}  // namespace

void Tokenizer::Impl::encode_spm(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<size_t> lengths;
  lengths.reserve(text.size());
  for (size_t offs = 0; offs < text.size();) {
    const size_t n = std::min(utf8_len(text[offs]), text.size() - offs);
    lengths.push_back(n);
    offs += n;
  }
  std::vector<MergeSymbol> sym = link_symbols(lengths);
  out.reserve(out.size() + text.size() / 2);
  // Highest-scoring merged token first.
  const int first = merge_symbols<float>(
      sym,
      [&](const std::vector<MergeSymbol>& s, int l, int r) -> std::optional<float> {
        const int32_t id = find(text.substr(s[l].pos, s[l].n + s[r].n));
        if (id < 0) return std::nullopt;
        return scores[id];
      },
      std::greater<float>{});
  for (int i = first; i != -1; i = sym[i].next)
    resegment(*this, text.substr(sym[i].pos, sym[i].n), out);
}

}  // namespace epyctune::engine
