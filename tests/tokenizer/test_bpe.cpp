// GPT-2 byte-level BPE on a small hand-built vocabulary whose expected
// output is derived by hand in the comments, and the two pre-tokenizers.
#include <doctest/doctest.h>

#include <algorithm>

#include "engine/synth/gguf_writer.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/tokenizer/tokenizer_impl.hpp"
#include "engine/tokenizer/unicode.hpp"
#include "test_util.hpp"

using namespace epyctune::engine;

namespace {

// Tokens 0..255: every byte's GPT-2 image (so id == byte value), then merged pieces.
std::unique_ptr<Tokenizer> tiny_bpe(const std::string& pre, std::unique_ptr<gguf::File>& keep) {
  static epyctune::testing::TempDir dir;
  const auto path = dir.path() / (pre + ".gguf");
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(unicode::byte_to_unicode(static_cast<uint8_t>(b)));
    types.push_back(1);
  }
  // 256      257   258      259   260    261   262      263
  for (const char* t :
       {"\xc4\xa0t", "he", "\xc4\xa0the", "lo", "low", "er", "lower", "<|endoftext|>"}) {
    tokens.push_back(t);
    types.push_back(1);
  }
  types.back() = 3;  // control
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  // Ranks 0..6 in this order.
  w.set_string_array("tokenizer.ggml.merges",
                     {"\xc4\xa0 t", "h e", "\xc4\xa0t he", "l o", "lo w", "e r", "low er"});
  w.set_u32("tokenizer.ggml.bos_token_id", 263);
  w.set_u32("tokenizer.ggml.eos_token_id", 263);
  w.begin(path);
  w.finish();
  keep = gguf::File::open(path);
  return Tokenizer::from_gguf(*keep);
}

std::vector<std::string> split(std::string_view text, PreTokenizer k) {
  std::vector<std::string> out;
  for (auto s : pretokenize(text, k)) out.emplace_back(s);
  return out;
}

}  // namespace

TEST_CASE("byte-to-unicode mapping is GPT-2's") {
  CHECK(unicode::byte_to_unicode(' ') == "\xc4\xa0");   // U+0120 'Ġ'
  CHECK(unicode::byte_to_unicode('\n') == "\xc4\x8a");  // U+010A 'Ċ'
  CHECK(unicode::byte_to_unicode('a') == "a");
  CHECK(unicode::byte_to_unicode(0xAD) == "\xc5\x83");  // soft hyphen is remapped (U+0143)
  for (int b = 0; b < 256; ++b) {
    const auto cps = unicode::decode_utf8(unicode::byte_to_unicode(static_cast<uint8_t>(b)));
    REQUIRE(cps.size() == 1);
    CHECK(unicode::unicode_to_byte(cps[0].cp) == b);
  }
}

TEST_CASE("gpt2 pre-tokenizer follows the regex alternatives") {
  using V = std::vector<std::string>;
  CHECK(split("Hello world  foo\n\nbar 123 it's", PreTokenizer::Gpt2) ==
        V{"Hello", " world", " ", " foo", "\n", "\n", "bar", " 123", " it", "'s"});
  CHECK(split("IT'S 12345!!", PreTokenizer::Gpt2) == V{"IT", "'", "S", " 12345", "!!"});
  CHECK(split("  ", PreTokenizer::Gpt2) == V{"  "});
  CHECK(split("caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd", PreTokenizer::Gpt2) ==
        V{"caf\xc3\xa9", " \xe4\xbd\xa0\xe5\xa5\xbd"});
}

TEST_CASE("llama3 pre-tokenizer follows the regex alternatives") {
  using V = std::vector<std::string>;
  CHECK(split("Hello world  foo\n\nbar 123 it's", PreTokenizer::Llama3) ==
        V{"Hello", " world", " ", " foo", "\n\n", "bar", " ", "123", " it", "'s"});
  CHECK(split("IT'S 12345", PreTokenizer::Llama3) == V{"IT", "'S", " ", "123", "45"});
  CHECK(split("hello!!\n\nx", PreTokenizer::Llama3) == V{"hello", "!!\n\n", "x"});
  CHECK(split("(foo) \t\n  bar", PreTokenizer::Llama3) == V{"(foo", ")", " \t\n", " ", " bar"});
}

TEST_CASE("BPE merges by rank on a hand-built vocabulary") {
  std::unique_ptr<gguf::File> keep;
  auto tok = tiny_bpe("gpt2", keep);
  CHECK(tok->kind() == Tokenizer::Kind::Bpe);
  CHECK(tok->n_vocab() == 264);
  // "the": t h e -> (h,e) rank 1 -> t|he ; "t he" is no merge (only "Ġt he").
  // " lower": Ġ l o w e r -> lo (3), low (4), er (5), lower (6) -> Ġ|lower.
  // " the": Ġ t h e -> Ġt (0), he (1), Ġthe (2).
  CHECK(tok->encode("the lower the", false) == std::vector<int32_t>{'t', 257, ' ', 262, 258});
  // No BOS for gpt2 unless the file asks for it.
  CHECK(tok->encode("the", true) == std::vector<int32_t>{'t', 257});
  // Unmerged bytes are their own tokens; newline is byte 10.
  CHECK(tok->encode("lo\nw", false) == std::vector<int32_t>{259, '\n', 'w'});
  CHECK(tok->token_to_piece(258) == " the");
  CHECK(tok->token_to_piece(263).empty());
  CHECK(tok->is_eog(263));
  CHECK(tok->decode(std::vector<int32_t>{258, 263, ' ', 262}) == " the lower");
}

TEST_CASE("BPE round-trips UTF-8 text with both pre-tokenizers") {
  const std::vector<std::string> texts = {
      "Hello, y'all! How are you \xf0\x9f\x98\x81 ?\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8"
      "apple",
      "  leading spaces\n\n\ttabs and\r\nCRLF  ",
      "the lower the lowest lowerer 1234567",
      "\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe \xd0\xbd\xd0\xb0 C\xe1\xbb\xad"
      "a Vi\xe1\xbb\x87t",
      std::string("bad utf8 \xff\xfe\xc3 end"),
      ""};
  for (const char* pre : {"gpt2", "llama3"}) {
    std::unique_ptr<gguf::File> keep;
    auto tok = tiny_bpe(pre, keep);
    for (const auto& t : texts) {
      CAPTURE(pre);
      CAPTURE(t);
      CHECK(tok->decode(tok->encode(t, false)) == t);
    }
  }
}

TEST_CASE("llama3 pre-tokenizer: whole-token pre-tokens skip merging and BOS is on") {
  std::unique_ptr<gguf::File> keep;
  auto tok = tiny_bpe("llama-bpe", keep);
  CHECK(tok->add_bos());
  CHECK(tok->encode(" lower", true) == std::vector<int32_t>{263, ' ', 262});
}

TEST_CASE("a gpt2 vocabulary with an unknown pre-tokenizer is refused by name") {
  std::unique_ptr<gguf::File> keep;
  CHECK_THROWS_WITH_AS(tiny_bpe("tekken", keep),
                       doctest::Contains("'tekken' is not supported (supported: default"),
                       gguf::FormatError);
  for (const char* pre : {"qwen2", "deepseek-v3", "gpt-4o"}) CHECK_NOTHROW(tiny_bpe(pre, keep));
}

TEST_CASE("control tokens: split out only with parse_special, shown only when asked") {
  std::unique_ptr<gguf::File> keep;
  auto tok = tiny_bpe("gpt2", keep);
  const auto plain = tok->encode("he<|endoftext|>", false);
  CHECK(plain.size() > 2);
  CHECK(std::find(plain.begin(), plain.end(), 263) == plain.end());
  CHECK(tok->encode("he<|endoftext|>", false, true) == std::vector<int32_t>{257, 263});
  CHECK(tok->token_to_piece(263).empty());
  CHECK(tok->token_to_piece(263, true) == "<|endoftext|>");
  const std::vector<int32_t> ids{257, 263};
  CHECK(tok->decode(ids) == "he");
  CHECK(tok->decode(ids, true) == "he<|endoftext|>");
  CHECK(tok->is_eog(263));
  CHECK(tok->eog_ids() == std::vector<int32_t>{263});
}

TEST_CASE("end of generation: eot from the vocabulary, harmony's <|end|> is not one") {
  static epyctune::testing::TempDir dir;
  auto load = [&](std::vector<std::string> extra, std::unique_ptr<gguf::File>& keep) {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b)
      tokens.push_back(unicode::byte_to_unicode(static_cast<uint8_t>(b)));
    std::vector<int32_t> types(256, 1);
    for (auto& t : extra) {
      tokens.push_back(t);
      types.push_back(3);
    }
    gguf::Writer w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "gpt-4o");
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_string_array("tokenizer.ggml.merges", {});
    w.set_u32("tokenizer.ggml.eos_token_id", 256);
    const auto path = dir.path() / (std::to_string(extra.size()) + ".gguf");
    w.begin(path);
    w.finish();
    keep = gguf::File::open(path);
    return Tokenizer::from_gguf(*keep);
  };
  std::unique_ptr<gguf::File> k1, k2;
  // 256 <|return|>, 257 <|end|>, 258 <|call|>, 259 <|message|>
  auto harmony = load({"<|return|>", "<|end|>", "<|call|>", "<|message|>"}, k1);
  CHECK(harmony->eog_ids() == std::vector<int32_t>{256, 258});
  // Harmony's markup is rendered and always parsed, as llama.cpp does for its parser.
  CHECK(harmony->token_type(259) == Tokenizer::TokenType::UserDefined);
  CHECK(harmony->encode("<|message|>", false) == std::vector<int32_t>{259});
  auto chatml = load({"<|endoftext|>", "<|im_end|>"}, k2);
  CHECK(chatml->eot() == 257);
  CHECK(chatml->eog_ids() == std::vector<int32_t>{256, 257});
}
