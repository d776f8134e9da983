// SPM merging on a hand-built vocabulary, with expectations derived by hand.
#include <doctest/doctest.h>

#include "engine/synth/gguf_writer.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "test_util.hpp"

using namespace epyctune::engine;

TEST_CASE("SPM merges by score, leftmost first, with user-defined tokens and byte fallback") {
  epyctune::testing::TempDir dir;
  const auto path = dir.path() / "spm.gguf";
  {
    gguf::Writer w;
    w.set_string("tokenizer.ggml.model", "llama");
    //                       0        1      2       3               4    5    6
    w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b",
                                                 "\xe2\x96\x81"
                                                 "a",
                                                 // 7   8                       9         10 11
                                                 "ab",
                                                 "\xe2\x96\x81"
                                                 "ab",
                                                 "<tool>", "<0x0A>", "<|im_end|>"});
    w.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, -1, -2, -3, -4, -5, -6, 0, 0, 0});
    w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1, 1, 4, 6, 3});
    w.begin(path);
    w.finish();
  }
  auto f = gguf::File::open(path);
  auto tok = Tokenizer::from_gguf(*f);
  // "ab ab" -> ▁ a b ▁ a b. Best pair "▁a" (-4) twice, leftmost first; then
  // "▁ab" (-6) twice; the "ab" (-5) entries went stale when their 'a' merged.
  CHECK(tok->encode("ab ab", false) == std::vector<int32_t>{8, 8});
  // A user-defined token is cut out verbatim; text after it gets the space
  // prefix again (as llama.cpp does after any special token).
  CHECK(tok->encode("a<tool>b", true) == std::vector<int32_t>{1, 6, 9, 3, 5});
  // No token for "c" and no <0x63> byte token: <unk>. "\n" has its byte token.
  CHECK(tok->encode("c\n", false) == std::vector<int32_t>{3, 0, 10});
  CHECK(tok->token_to_piece(10) == "\n");
  CHECK(tok->token_to_piece(0) == "\xe2\x96\x85");  // <unk> shows as U+2585, like llama.cpp
  CHECK(tok->token_to_piece(1).empty());
  CHECK(tok->decode(std::vector<int32_t>{1, 8, 8}) == "ab ab");
  CHECK(tok->is_eog(2));
  CHECK(tok->is_eog(11));  // a chat end-of-turn control token
  CHECK_FALSE(tok->is_eog(9));
  CHECK(tok->encode("", true) == std::vector<int32_t>{1});
  CHECK(tok->encode("", false).empty());
  CHECK_THROWS_AS(tok->token_to_piece(12), std::out_of_range);
}
