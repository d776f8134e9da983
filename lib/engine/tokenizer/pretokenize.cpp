// Hand-written scanners equivalent to the pre-tokenizer regexes of the
// tokenizer.json files (the patterns llama.cpp lists for each
// tokenizer.ggml.pre), so no regex engine (and no \p{..} support) is needed.
// Alternatives are tried in pattern order at each position, first match wins,
// as a backtracking regex does; text no alternative matches is kept as one
// piece, as a "Split, Isolated" pre-tokenizer keeps the gaps between matches.
//
// gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//         | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// qwen2:  llama3 with \p{N} instead of \p{N}{1,3}
// deepseek-v3, three splits, each applied to the pieces of the one before:
//         \p{N}{1,3}
//         [\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+
//         [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//         | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// gpt-4o (o200k): with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}],
//         C = (?i:'s|'t|'re|'ve|'m|'ll|'d):
//         [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,3}
//         | ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// gpt-4o follows the tokenizer.json pattern; llama.cpp runs an ASCII-case
// approximation of it, which differs only for non-ASCII case and marks.
#include "engine/tokenizer/tokenizer_impl.hpp"
#include "engine/tokenizer/unicode.hpp"

namespace epyctune::engine {
namespace {

using unicode::CodePoint;
constexpr size_t kNoMatch = SIZE_MAX;

struct Range {
  size_t b, e;  // code point indices
};

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text), cps_(unicode::decode_utf8(text)) {}

  std::vector<std::string_view> split(PreTokenizer kind) {
    std::vector<Range> pieces{{0, cps_.size()}};
    switch (kind) {
      case PreTokenizer::Gpt2:
        pieces = split_all(pieces, &Scanner::next_gpt2);
        break;
      case PreTokenizer::Llama3:
        pieces = split_all(pieces, &Scanner::next_llama3);
        break;
      case PreTokenizer::Qwen2:
        pieces = split_all(pieces, &Scanner::next_qwen2);
        break;
      case PreTokenizer::DeepseekV3:
        pieces = split_all(pieces, &Scanner::digits3);
        pieces = split_all(pieces, &Scanner::cjk_run);
        pieces = split_all(pieces, &Scanner::next_deepseek);
        break;
      case PreTokenizer::Gpt4o:
        pieces = split_all(pieces, &Scanner::next_gpt4o);
        break;
    }
    std::vector<std::string_view> out;
    out.reserve(pieces.size());
    for (const Range& r : pieces) {
      const size_t b = cps_[r.b].offset;
      const size_t e = r.e < cps_.size() ? cps_[r.e].offset : text_.size();
      out.push_back(text_.substr(b, e - b));
    }
    return out;
  }

 private:
  using Matcher = size_t (Scanner::*)(size_t) const;

  // Each piece is scanned on its own: the pattern sees the piece's end as the
  // end of the text (as llama.cpp and HF tokenizers split sequentially).
  std::vector<Range> split_all(const std::vector<Range>& in, Matcher match) {
    std::vector<Range> out;
    out.reserve(in.size() * 2);
    for (const Range& r : in) {
      end_ = r.e;
      size_t gap = r.b;  // start of unmatched text, kept as one piece
      size_t i = r.b;
      while (i < r.e) {
        const size_t e = (this->*match)(i);
        if (e == kNoMatch || e <= i) {
          ++i;
          continue;
        }
        if (gap < i) out.push_back({gap, i});
        out.push_back({i, e});
        i = gap = e;
      }
      if (gap < r.e) out.push_back({gap, r.e});
    }
    return out;
  }

  uint32_t at(size_t i) const { return i < end_ ? cps_[i].cp : 0xFFFFFFFF; }
  uint32_t cat(size_t i) const { return i < end_ ? unicode::categories(cps_[i].cp) : 0; }
  bool L(size_t i) const { return i < end_ && unicode::is_letter(cps_[i].cp); }
  bool N(size_t i) const { return i < end_ && unicode::is_number(cps_[i].cp); }
  bool S(size_t i) const { return i < end_ && unicode::is_whitespace(cps_[i].cp); }
  bool nl(size_t i) const { return at(i) == '\r' || at(i) == '\n'; }
  // [^\s\p{L}\p{N}]
  bool other(size_t i) const { return i < end_ && !S(i) && !L(i) && !N(i); }
  // [^\r\n\p{L}\p{N}], the optional lead character before a word
  bool lead(size_t i) const { return i < end_ && !nl(i) && !L(i) && !N(i); }
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
    if (k < end_ && k - i > 1) return k - 1;  // leave one space for the next word
    return k;
  }

  // \s*[\r\n]+|\s+(?!\S)|\s+
  size_t newline_or_space(size_t i) const {
    size_t k = i;
    size_t last_nl = kNoMatch;
    while (S(k)) {
      if (nl(k)) last_nl = k;
      ++k;
    }
    if (last_nl != kNoMatch) return last_nl + 1;  // \s*[\r\n]+
    return S(i) ? whitespace(i) : kNoMatch;
  }

  // " ?" then a run of pred, then a run of tail characters.
  template <class Pred, class Tail>
  size_t symbols(size_t i, Pred pred, Tail tail) const {
    const size_t j = at(i) == ' ' ? i + 1 : i;
    if (!pred(j)) return kNoMatch;
    size_t k = j;
    while (pred(k)) ++k;
    while (tail(k)) ++k;
    return k;
  }

  size_t run(size_t k, bool (Scanner::*pred)(size_t) const) const {
    while ((this->*pred)(k)) ++k;
    return k;
  }

  size_t next_gpt2(size_t i) const {
    if (size_t n = contraction(i, false)) return i + n;
    const size_t j = at(i) == ' ' ? i + 1 : i;
    if (L(j)) return run(j, &Scanner::L);
    if (N(j)) return run(j, &Scanner::N);
    if (other(j)) return run(j, &Scanner::other);
    return S(i) ? whitespace(i) : kNoMatch;
  }

  size_t llama3_like(size_t i, size_t max_digits) const {
    if (size_t n = contraction(i, true)) return i + n;
    if (L(i)) return run(i, &Scanner::L);
    if (lead(i) && L(i + 1)) return run(i + 1, &Scanner::L);
    if (N(i)) {
      size_t k = i + 1;
      while (k < i + max_digits && N(k)) ++k;
      return k;
    }
    const size_t e = symbols(
        i, [&](size_t k) { return other(k); }, [&](size_t k) { return nl(k); });
    if (e != kNoMatch) return e;
    return newline_or_space(i);
  }
  size_t next_llama3(size_t i) const { return llama3_like(i, 3); }
  size_t next_qwen2(size_t i) const { return llama3_like(i, 1); }

  size_t digits3(size_t i) const {
    if (!N(i)) return kNoMatch;
    size_t k = i + 1;
    while (k < i + 3 && N(k)) ++k;
    return k;
  }
  bool cjk(size_t i) const {
    const uint32_t c = at(i);
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x30FF);
  }
  size_t cjk_run(size_t i) const { return cjk(i) ? run(i, &Scanner::cjk) : kNoMatch; }

  bool ascii_letter(size_t i) const {
    return i < end_ && (lower(at(i)) >= 'a' && lower(at(i)) <= 'z');
  }
  bool ascii_punct(size_t i) const {
    const uint32_t c = at(i);
    return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
           (c >= '{' && c <= '~');
  }
  bool letter_or_mark(size_t i) const {
    return (cat(i) & (unicode::kLetter | unicode::kMark)) != 0;
  }
  bool punct_or_symbol(size_t i) const {
    return (cat(i) & (unicode::kPunctuation | unicode::kSymbol)) != 0;
  }

  size_t next_deepseek(size_t i) const {
    if (ascii_punct(i) && ascii_letter(i + 1)) return run(i + 1, &Scanner::ascii_letter);
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    const bool can_lead = i < end_ && !nl(i) &&
                          !(cat(i) & (unicode::kLetter | unicode::kPunctuation | unicode::kSymbol));
    if (can_lead && letter_or_mark(i + 1)) return run(i + 1, &Scanner::letter_or_mark);
    if (letter_or_mark(i)) return run(i, &Scanner::letter_or_mark);
    const size_t e = symbols(
        i, [&](size_t k) { return punct_or_symbol(k); }, [&](size_t k) { return nl(k); });
    if (e != kNoMatch) return e;
    return newline_or_space(i);
  }

  bool upper(size_t i) const {
    return (cat(i) &
            (unicode::kLu | unicode::kLt | unicode::kLm | unicode::kLo | unicode::kMark)) != 0;
  }
  bool lower_(size_t i) const {
    return (cat(i) & (unicode::kLl | unicode::kLm | unicode::kLo | unicode::kMark)) != 0;
  }
  size_t with_contraction(size_t k) const { return k + contraction(k, true); }

  // U*W+C? from s: U* is greedy, so W+ starts at the last position it can.
  size_t word_lower(size_t s) const {
    const size_t u_end = run(s, &Scanner::upper);
    for (size_t t = u_end + 1; t-- > s;)
      if (lower_(t)) return with_contraction(run(t, &Scanner::lower_));
    return kNoMatch;
  }
  // U+W*C? from s.
  size_t word_upper(size_t s) const {
    if (!upper(s)) return kNoMatch;
    return with_contraction(run(run(s, &Scanner::upper), &Scanner::lower_));
  }

  size_t next_gpt4o(size_t i) const {
    const bool has_lead = lead(i);
    size_t e = has_lead ? word_lower(i + 1) : kNoMatch;
    if (e == kNoMatch) e = word_lower(i);
    if (e == kNoMatch && has_lead) e = word_upper(i + 1);
    if (e == kNoMatch) e = word_upper(i);
    if (e != kNoMatch) return e;
    if (N(i)) return digits3(i);
    e = symbols(
        i, [&](size_t k) { return other(k); }, [&](size_t k) { return nl(k) || at(k) == '/'; });
    if (e != kNoMatch) return e;
    return newline_or_space(i);
  }

  std::string_view text_;
  std::vector<CodePoint> cps_;
  size_t end_ = 0;
};

}  // namespace

std::vector<std::string_view> pretokenize(std::string_view text, PreTokenizer kind) {
  return Scanner(text).split(kind);
}

}  // namespace epyctune::engine
