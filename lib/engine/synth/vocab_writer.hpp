// Vocabularies for generated models (mkmodel): a self-made SentencePiece
// vocabulary, or the tokenizer of another GGUF file copied over.
#pragma once

#include <cstdint>

#include "engine/synth/gguf_writer.hpp"

namespace epyctune::engine {

// Writes tokenizer.ggml.* keys for a deterministic "llama" (SPM) vocabulary of
// n_vocab tokens: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>, then
// common English words and sub-words (with the U+2581 space marker) scored so
// that real text tokenizes into whole words where possible. n_vocab >= 259.
// The same (n_vocab, seed) always gives the same vocabulary.
void write_synthetic_vocab(gguf::Writer& w, int n_vocab, uint64_t seed);

// Copies every tokenizer.* key of src into w (e.g. a real vocabulary file).
// Throws gguf::FormatError when src has no tokenizer.ggml.tokens.
void copy_vocab(const gguf::File& src, gguf::Writer& w);

}  // namespace epyctune::engine
