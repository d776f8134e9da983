// The text format of llama.cpp's tokenizer test vectors (tests/data/vocab/*.inp,
// *.out), used by `epyctune-engine tokenize --file` and the tests.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace epyctune::engine {

// Inputs separated by lines reading exactly "__ggml_vocab_test__": the text is
// split on "\n__ggml_vocab_test__\n", so an input's own newlines are kept and
// the newline before a separator belongs to the separator. Text without any
// separator is one input.
std::vector<std::string> split_vocab_test_inputs(std::string_view raw);

// One .out line: " id id id" (each id preceded by a space; "" for no ids).
std::string format_vocab_test_ids(std::span<const int32_t> ids);

}  // namespace epyctune::engine
