// Every file in corpus/ (made by make_corpus.py) is malformed: the reader, or
// for tok_* files the tokenizer loader, must refuse it with a FormatError that
// names the file and the expected problem, never crash or read out of bounds
// (this suite runs under ASan in CI). The valid file it was derived from must load.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "engine/gguf/gguf.hpp"
#include "engine/tokenizer/tokenizer.hpp"

using namespace epyctune::engine;

namespace {

std::vector<uint8_t> slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Parses and, when the file parses, builds the tokenizer; returns the error text.
std::string load_error(std::span<const uint8_t> bytes, const std::string& name) {
  try {
    auto f = gguf::File::parse(bytes, name);
    auto tok = Tokenizer::from_gguf(*f);
    return "";
  } catch (const gguf::FormatError& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("the valid tiny file the corpus derives from loads") {
  const auto bytes = slurp(EPYCTUNE_GGUF_CORPUS_DIR "/../valid_tiny.bin");
  auto f = gguf::File::parse(bytes, "valid_tiny.bin");
  CHECK(f->tensors().size() == 3);
  CHECK(f->tensor("t2")->nbytes == 18);
  CHECK(f->tensor("t2")->data + 18 == bytes.data() + bytes.size());
  auto tok = Tokenizer::from_gguf(*f);
  CHECK(tok->n_vocab() == 6);
  CHECK(tok->encode("a", false) == std::vector<int32_t>{3});
}

TEST_CASE("the gpt2 twin of the valid tiny file loads and merges") {
  const auto bytes = slurp(EPYCTUNE_GGUF_CORPUS_DIR "/../valid_tiny_gpt2.bin");
  auto f = gguf::File::parse(bytes, "valid_tiny_gpt2.bin");
  auto tok = Tokenizer::from_gguf(*f);
  CHECK(tok->kind() == Tokenizer::Kind::Bpe);
  // "ab a": pre-tokens "ab" and " a" (mapped "Ġa"), both whole tokens, taken as is.
  CHECK(tok->encode("ab a", true) == std::vector<int32_t>{5, 3, 4});
  CHECK(tok->is_eog(5));
}

TEST_CASE("every malformed corpus file fails cleanly with a FormatError naming the problem") {
  std::ifstream idx(EPYCTUNE_GGUF_CORPUS_DIR "/expect.tsv");
  REQUIRE(idx);
  size_t n = 0;
  for (std::string line; std::getline(idx, line);) {
    const size_t tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    const std::string name = line.substr(0, tab);
    const std::string expect = line.substr(tab + 1);
    CAPTURE(name);
    const auto path = std::filesystem::path(EPYCTUNE_GGUF_CORPUS_DIR) / name;
    const auto bytes = slurp(path);
    // An exact-size heap copy, so ASan flags any read past the end.
    std::vector<uint8_t> exact(bytes.begin(), bytes.end());
    const std::string err = load_error(exact, name);
    CHECK_MESSAGE(!err.empty(), "accepted a malformed file");
    CHECK(err.find(name) != std::string::npos);
    CHECK_MESSAGE(err.find(expect) != std::string::npos, "error: ", err, " expected: ", expect);
    // The mmap path must agree (empty files are refused before mapping).
    if (!name.starts_with("tok_")) CHECK_THROWS_AS(gguf::File::open(path), gguf::FormatError);
    ++n;
  }
  CHECK(n > 100);
}
