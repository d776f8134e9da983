// The shared llama SentencePiece vectors: every line of the .out file must be
// reproduced exactly for the matching string of the .inp file.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "engine/tokenizer/tokenizer.hpp"
#include "engine/tokenizer/vocab_test_format.hpp"
#include "tokenizer_test_util.hpp"

using namespace epyctune::engine;

TEST_CASE("llama SPM tokenizer reproduces every shared test vector") {
  const std::string base = EPYCTUNE_VOCAB_DIR "/ggml-vocab-llama-spm.gguf";
  auto file = gguf::File::open(base);
  auto tok = Tokenizer::from_gguf(*file);
  CHECK(tok->kind() == Tokenizer::Kind::Spm);
  CHECK(tok->n_vocab() == 32000);
  CHECK(tok->bos() == 1);
  CHECK(tok->eos() == 2);
  CHECK(tok->is_eog(2));
  CHECK_FALSE(tok->is_eog(1));

  const auto inputs = split_vocab_test_inputs(testutil::read_file(base + ".inp"));
  std::vector<std::string> expected;
  {
    std::istringstream out(testutil::read_file(base + ".out"));
    for (std::string line; std::getline(out, line);) expected.push_back(line);
  }
  REQUIRE(inputs.size() == expected.size());
  REQUIRE(inputs.size() >= 40);
  for (size_t i = 0; i < inputs.size(); ++i) {
    CAPTURE(i);
    CAPTURE(inputs[i]);
    const auto ids = tok->encode(inputs[i], false);
    CHECK(format_vocab_test_ids(ids) == expected[i]);
    CHECK(tok->decode(ids) == inputs[i]);
    // BOS goes first when asked for, and decodes to nothing.
    const auto with_bos = tok->encode(inputs[i], true);
    REQUIRE(!with_bos.empty());
    CHECK(with_bos[0] == tok->bos());
    CHECK(with_bos.size() == ids.size() + 1);
  }
}
