// Vocabulary-only GGUF files from a Hugging Face tokenizer.json (and its
// tokenizer_config.json), so tests can use the real token tables, merges and
// special tokens of Llama 3, Qwen, DeepSeek and gpt-oss without downloading
// any weights. The keys follow llama.cpp's converter: added tokens marked
// "special" become control tokens, the other added tokens user-defined, ids
// nothing names are filled with unused "[PAD<id>]" tokens.
#pragma once

#include <filesystem>
#include <string>

#include "engine/synth/gguf_writer.hpp"

namespace epyctune::engine {

struct VocabJsonOptions {
  std::filesystem::path tokenizer_json;
  // tokenizer_config.json: special token names, add_bos_token, chat_template.
  // Empty: the file of that name beside tokenizer_json, when there is one.
  std::filesystem::path config_json;
  // tokenizer.ggml.pre; empty: recognised from the pre-tokenizer's pattern.
  std::string pre;
  std::string name;  // general.name; empty: the tokenizer.json's folder name
};

// Writes the tokenizer.ggml.* keys. Throws std::runtime_error naming the file
// and what is wrong (not a BPE model, an unrecognised pattern, ...).
void write_vocab_from_json(gguf::Writer& w, const VocabJsonOptions& o);

// A complete vocabulary-only GGUF (no tensors) at out.
void write_vocab_gguf(const std::filesystem::path& out, const VocabJsonOptions& o);

// The tokenizer.ggml.pre name of a tokenizer.json pre_tokenizer's Split
// patterns (in order), or "" when the patterns are none the engine knows.
std::string detect_pre_tokenizer(const std::vector<std::string>& split_patterns);

}  // namespace epyctune::engine
