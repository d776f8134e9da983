// SentencePiece-style encoding as llama.cpp's SPM tokenizer does it: start
// from UTF-8 characters, repeatedly merge the adjacent pair whose
// concatenation is the highest-scoring vocabulary token (ties: leftmost), then
// emit each symbol, falling back to <0xXX> byte tokens.
#include <queue>

#include "engine/tokenizer/tokenizer_impl.hpp"

namespace epyctune::engine {
namespace {

struct Symbol {
  int prev, next;
  const char* text;
  size_t n;
};

struct Bigram {
  int left, right;
  float score;
  size_t size;
};

struct BigramLess {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

// Length of a UTF-8 sequence from its first byte, as llama.cpp counts it
// (a stray continuation byte is a 1-byte symbol); keeps splits identical.
size_t utf8_len(char c) {
  static const size_t lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[static_cast<uint8_t>(c) >> 4];
}

class Session {
 public:
  explicit Session(const Tokenizer::Impl& v) : v_(v) {}

  void tokenize(std::string_view text, std::vector<int32_t>& out) {
    symbols_.reserve(text.size());
    {
      std::vector<Bigram> storage;
      storage.reserve(text.size());
      queue_ = decltype(queue_)(BigramLess{}, std::move(storage));
    }
    out.reserve(out.size() + text.size() / 2);
    size_t offs = 0;
    int index = 0;
    while (offs < text.size()) {
      Symbol s;
      s.text = text.data() + offs;
      s.n = std::min(utf8_len(text[offs]), text.size() - offs);
      offs += s.n;
      s.prev = index - 1;
      s.next = offs == text.size() ? -1 : index + 1;
      ++index;
      symbols_.push_back(s);
    }
    for (size_t i = 1; i < symbols_.size(); ++i)
      try_add_bigram(static_cast<int>(i - 1), static_cast<int>(i));
    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      auto& l = symbols_[b.left];
      auto& r = symbols_[b.right];
      // Stale entry: one side was merged away since it was queued.
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) symbols_[r.next].prev = b.left;
      try_add_bigram(l.prev, b.left);
      try_add_bigram(b.left, l.next);
    }
    for (int i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next)
      resegment(symbols_[i], out);
  }

 private:
  void try_add_bigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view text(symbols_[left].text, symbols_[left].n + symbols_[right].n);
    const int32_t id = v_.find(text);
    if (id < 0) return;
    queue_.push({left, right, v_.scores[id], text.size()});
  }

  // llama.cpp re-splits a non-token symbol along its merge history, but a
  // merge only ever forms a vocabulary token, so a symbol that is not a token
  // is a single character: it falls back to its bytes.
  void resegment(const Symbol& s, std::vector<int32_t>& out) const {
    const std::string_view text(s.text, s.n);
    if (const int32_t id = v_.find(text); id >= 0) {
      out.push_back(id);
      return;
    }
    for (char c : text) {
      const int32_t b = v_.byte_token[static_cast<uint8_t>(c)];
      if (b >= 0)
        out.push_back(b);
      else if (v_.unk >= 0)
        out.push_back(v_.unk);
    }
  }

  const Tokenizer::Impl& v_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue_;
};

}  // namespace

void Tokenizer::Impl::encode_spm(std::string_view text, std::vector<int32_t>& out) const {
  Session(*this).tokenize(text, out);
}

}  // namespace epyctune::engine
