// Vocabulary-only GGUFs from a Hugging Face tokenizer.json, on the tiny
// hand-made ChatML vocabulary in tests/data/vocab/tiny-chatml.
#include <doctest/doctest.h>

#include <fstream>

#include "engine/gguf/gguf.hpp"
#include "engine/synth/vocab_json.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "test_util.hpp"

using namespace epyctune::engine;

namespace {
const std::filesystem::path kTiny =
    std::filesystem::path(EPYCTUNE_VOCAB_DIR) / "tiny-chatml" / "tokenizer.json";
}

TEST_CASE("vocab from tokenizer.json: tokens, merges, special tokens, template") {
  epyctune::testing::TempDir dir;
  const auto out = dir.path() / "v.gguf";
  write_vocab_gguf(out, {kTiny, {}, {}, {}});
  const auto f = gguf::File::open(out);
  CHECK(f->get_string("tokenizer.ggml.pre") == "qwen2");
  const auto tok = Tokenizer::from_gguf(*f);
  CHECK(tok->n_vocab() == 260);
  CHECK(tok->token_type(258) == Tokenizer::TokenType::Control);
  CHECK(tok->token_type(65) == Tokenizer::TokenType::Normal);
  CHECK(tok->eos() == 259);
  CHECK(tok->is_eog(259));
  CHECK(tok->eot() == 259);
  CHECK(tok->chat_template().find("<|im_start|>") != std::string::npos);
  // [["H","i"],["Ġ","b"]] merges, listed as pairs as newer files do.
  CHECK(tok->encode("Hi b", false) == std::vector<int32_t>{256, 257});
  CHECK(tok->encode("<|im_end|>Hi", false, true) == std::vector<int32_t>{259, 256});
}

TEST_CASE("vocab from tokenizer.json: the pre-tokenizer is recognised or named by hand") {
  CHECK(
      detect_pre_tokenizer(
          {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}) ==
      "llama-bpe");
  CHECK(detect_pre_tokenizer({R"(\p{N}{1,3})", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
                              R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|x)"}) ==
        "deepseek-v3");
  CHECK(detect_pre_tokenizer({R"(\w+)"}).empty());

  epyctune::testing::TempDir dir;
  const auto odd = dir.path() / "tokenizer.json";
  {
    std::ifstream in(kTiny);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    s.replace(s.find("(?i:"), 4, "(?x:");
    std::ofstream(odd) << s;
  }
  gguf::Writer w;
  CHECK_THROWS_WITH(write_vocab_from_json(w, {odd, {}, {}, {}}), doctest::Contains("--pre"));
  CHECK_NOTHROW(write_vocab_from_json(w, {odd, {}, "qwen2", {}}));
}
