// The synthetic vocabulary for generated models, and copying a real one.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>

#include "engine/synth/vocab_writer.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "test_util.hpp"

using namespace epyctune::engine;

namespace {

std::vector<char> slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::filesystem::path write_synthetic(const epyctune::testing::TempDir& dir, int n, uint64_t seed) {
  const auto path = dir.path() / ("v" + std::to_string(n) + "_" + std::to_string(seed) + ".gguf");
  gguf::Writer w;
  write_synthetic_vocab(w, n, seed);
  w.begin(path);
  w.finish();
  return path;
}

}  // namespace

TEST_CASE("synthetic vocabulary tokenizes real text into words and decodes it exactly") {
  epyctune::testing::TempDir dir;
  for (int n : {260, 1000, 4096, 32000}) {
    CAPTURE(n);
    auto f = gguf::File::open(write_synthetic(dir, n, 7));
    auto tok = Tokenizer::from_gguf(*f);
    REQUIRE(tok->n_vocab() == n);
    CHECK(tok->token_text(0) == "<unk>");
    CHECK(tok->bos() == 1);
    CHECK(tok->eos() == 2);
    CHECK(tok->token_text(3) == "<0x00>");
    CHECK(tok->token_text(258) == "<0xFF>");
    for (std::string text : {"The quick brown fox jumps over the lazy dog.",
                             "Hello, world!\n\tTabs, newlines and  double  spaces.",
                             "Unicode: caf\xc3\xa9, \xe4\xbd\xa0\xe5\xa5\xbd, \xf0\x9f\xa6\x99!",
                             "In the year 2024 the people of the world found water."}) {
      CAPTURE(text);
      const auto ids = tok->encode(text, true);
      REQUIRE(!ids.empty());
      CHECK(ids[0] == 1);
      for (int32_t id : ids) CHECK((id >= 0 && id < n));
      CHECK(tok->decode(ids) == text);
    }
  }
  // With a real-sized vocabulary, frequent words are single tokens.
  auto f = gguf::File::open(write_synthetic(dir, 4096, 7));
  auto tok = Tokenizer::from_gguf(*f);
  const auto ids = tok->encode("the people of the world", false);
  CHECK(ids.size() == 5);
  CHECK(tok->token_text(ids[0]) == "\xe2\x96\x81the");
}

TEST_CASE("synthetic vocabulary is deterministic per seed") {
  epyctune::testing::TempDir dir;
  CHECK(slurp(write_synthetic(dir, 5000, 1)) == slurp(write_synthetic(dir, 5000, 1)));
  // 5000 tokens need seeded padding pieces, so another seed gives another vocabulary.
  const auto a = write_synthetic(dir, 5000, 1);
  const auto b = write_synthetic(dir, 5000, 2);
  CHECK(slurp(a) != slurp(b));
  CHECK_THROWS_AS(write_synthetic(dir, 100, 1), std::invalid_argument);
}

TEST_CASE("copy_vocab carries a real vocabulary into a new file unchanged") {
  epyctune::testing::TempDir dir;
  auto src = gguf::File::open(EPYCTUNE_VOCAB_DIR "/ggml-vocab-llama-spm.gguf");
  const auto path = dir.path() / "copy.gguf";
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  copy_vocab(*src, w);
  w.begin(path);
  w.finish();
  auto dst = gguf::File::open(path);
  auto a = Tokenizer::from_gguf(*src);
  auto b = Tokenizer::from_gguf(*dst);
  CHECK(b->n_vocab() == a->n_vocab());
  const std::string text = "Hello world, this is a copied vocabulary.";
  CHECK(b->encode(text, true) == a->encode(text, true));
  CHECK(dst->get_string("general.architecture") == "llama");

  gguf::Writer empty;
  gguf::Writer w2;
  const auto p2 = dir.path() / "novocab.gguf";
  empty.set_string("general.architecture", "llama");
  empty.begin(p2);
  empty.finish();
  auto novocab = gguf::File::open(p2);
  CHECK_THROWS_AS(copy_vocab(*novocab, w2), gguf::FormatError);
  CHECK_THROWS_WITH_AS(Tokenizer::from_gguf(*novocab), doctest::Contains("tokenizer.ggml.model"),
                       gguf::FormatError);
}
