// Hand-written scanners equivalent to the two pre-tokenizer regexes, so no
// regex engine (and no \p{..} support) is needed. Alternatives are tried in
// pattern order at each position, first match wins, as a backtracking regex does.
//
// gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//         | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
#include "engine/tokenizer/tokenizer_impl.hpp"
#include "engine/tokenizer/unicode.hpp"

namespace epyctune::engine {
namespace {

using unicode::CodePoint;

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text), cps_(unicode::decode_utf8(text)) {}

  std::vector<std::string_view> split(PreTokenizer kind) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < cps_.size()) {
      const size_t end = kind == PreTokenizer::Gpt2 ? next_gpt2(i) : next_llama3(i);
      const size_t b = cps_[i].offset;
      const size_t e = end < cps_.size() ? cps_[end].offset : text_.size();
      out.push_back(text_.substr(b, e - b));
      i = end;
    }
    return out;
  }

 private:
  uint32_t at(size_t i) const { return i < cps_.size() ? cps_[i].cp : 0xFFFFFFFF; }
  bool L(size_t i) const { return i < cps_.size() && unicode::is_letter(cps_[i].cp); }
  bool N(size_t i) const { return i < cps_.size() && unicode::is_number(cps_[i].cp); }
  bool S(size_t i) const { return i < cps_.size() && unicode::is_whitespace(cps_[i].cp); }
  // [^\s\p{L}\p{N}]
  bool other(size_t i) const { return i < cps_.size() && !S(i) && !L(i) && !N(i); }
  static uint32_t lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

  // Length of a contraction match at i ('s 't 're 've 'm 'll 'd), 0 if none.
  size_t contraction(size_t i, bool fold) const {
    if (at(i) != '\'') return 0;
    auto c = [&](size_t k) { return fold ? lower(at(k)) : at(k); };
    const uint32_t a = c(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    const uint32_t b = c(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  // \s+(?!\S) then \s+, for a whitespace run starting at i.
  size_t whitespace(size_t i) const {
    size_t k = i;
    while (S(k)) ++k;
    if (k < cps_.size() && k - i > 1) return k - 1;  // leave one space for the next word
    return k;
  }

  size_t next_gpt2(size_t i) const {
    if (size_t n = contraction(i, false)) return i + n;
    const size_t j = at(i) == ' ' ? i + 1 : i;
    if (L(j)) {
      size_t k = j;
      while (L(k)) ++k;
      return k;
    }
    if (N(j)) {
      size_t k = j;
      while (N(k)) ++k;
      return k;
    }
    if (other(j)) {
      size_t k = j;
      while (other(k)) ++k;
      return k;
    }
    if (S(i)) return whitespace(i);
    return i + 1;  // unreachable: every code point is L, N, \s or other
  }

  size_t next_llama3(size_t i) const {
    if (size_t n = contraction(i, true)) return i + n;
    const uint32_t c = at(i);
    if (L(i) || (c != '\r' && c != '\n' && !N(i) && L(i + 1))) {
      size_t k = i + 1;
      while (L(k)) ++k;
      return k;
    }
    if (N(i)) {
      size_t k = i + 1;
      while (k < i + 3 && N(k)) ++k;
      return k;
    }
    const size_t j = c == ' ' ? i + 1 : i;
    if (other(j)) {
      size_t k = j;
      while (other(k)) ++k;
      while (at(k) == '\r' || at(k) == '\n') ++k;
      return k;
    }
    if (S(i)) {
      size_t k = i;
      size_t last_nl = SIZE_MAX;
      while (S(k)) {
        if (at(k) == '\r' || at(k) == '\n') last_nl = k;
        ++k;
      }
      if (last_nl != SIZE_MAX) return last_nl + 1;  // \s*[\r\n]+
      return whitespace(i);
    }
    return i + 1;
  }

  std::string_view text_;
  std::vector<CodePoint> cps_;
};

}  // namespace

std::vector<std::string_view> pretokenize(std::string_view text, PreTokenizer kind) {
  return Scanner(text).split(kind);
}

}  // namespace epyctune::engine
