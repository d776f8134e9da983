// The qwen2, deepseek-v3 and gpt-4o pre-tokenizers. Expected splits are what
// the patterns in the models' tokenizer.json give under a Unicode regex
// engine (Python's regex module, splitting as HF's "Split, Isolated" does);
// reference/compare.sh checks whole vocabularies against the real tokenizers.
#include <doctest/doctest.h>

#include "engine/tokenizer/tokenizer_impl.hpp"
#include "engine/tokenizer/unicode.hpp"

using namespace epyctune::engine;

namespace {
std::vector<std::string> split(std::string_view text, PreTokenizer k) {
  std::vector<std::string> out;
  for (auto s : pretokenize(text, k)) out.emplace_back(s);
  return out;
}
using V = std::vector<std::string>;
}  // namespace

TEST_CASE("unicode categories: the classes the patterns name") {
  using namespace unicode;
  CHECK(categories('A') == kLu);
  CHECK(categories('a') == kLl);
  CHECK(categories(0x01C5) == kLt);  // ǅ
  CHECK(categories(0x4E2D) == kLo);  // 中
  CHECK(categories(0x0301) == kMark);
  CHECK(categories('7') == kNumber);
  CHECK(categories('!') == kPunctuation);
  CHECK(categories('+') == kSymbol);
  CHECK(categories(' ') == 0);
}

TEST_CASE("qwen2 pre-tokenizer: llama3's pattern with single digits") {
  CHECK(
      split("Hello world  foo\n\nbar 12345 IT'S", PreTokenizer::Qwen2) ==
      V{"Hello", " world", " ", " foo", "\n\n", "bar", " ", "1", "2", "3", "4", "5", " IT", "'S"});
  CHECK(split("x=1;\n\n  y", PreTokenizer::Qwen2) == V{"x", "=", "1", ";\n\n", " ", " y"});
  CHECK(split("你好，世界！", PreTokenizer::Qwen2) == V{"你好", "，世界", "！"});
}

TEST_CASE("deepseek-v3 pre-tokenizer: digits, CJK runs, then the word pattern") {
  CHECK(split("Hello world 12345 foo.bar", PreTokenizer::DeepseekV3) ==
        V{"Hello", " world", " ", "123", "45", " foo", ".bar"});
  CHECK(split("你好世界abc日本語カタカナ", PreTokenizer::DeepseekV3) ==
        V{"你好世界", "abc", "日本語カタカナ"});
  CHECK(split("(x) !! \n\n  a", PreTokenizer::DeepseekV3) ==
        V{"(x", ")", " !!", " \n\n", " ", " a"});
  CHECK(split("नमस्ते 1234567", PreTokenizer::DeepseekV3) == V{"नमस्ते", " ", "123", "456", "7"});
}

TEST_CASE("gpt-4o pre-tokenizer: case-split words with contractions, digits by three") {
  CHECK(split("HelloWORLD fooBar XMLHttpRequest", PreTokenizer::Gpt4o) ==
        V{"Hello", "WORLD", " foo", "Bar", " XMLHttp", "Request"});
  CHECK(split("don't I'M it's", PreTokenizer::Gpt4o) == V{"don't", " I'M", " it's"});
  CHECK(split("a/b//\n 12345 ÀÉÎõü", PreTokenizer::Gpt4o) ==
        V{"a", "/b", "//\n", " ", "123", "45", " ÀÉÎõü"});
  CHECK(split("नमस्ते  \n\n x", PreTokenizer::Gpt4o) == V{"नमस्ते", "  \n\n", " x"});
}
