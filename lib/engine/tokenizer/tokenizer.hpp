// Text <-> token ids, built from a GGUF file's tokenizer.ggml.* metadata.
// Two models, as llama.cpp implements them:
//   "llama": SentencePiece-style; score-ordered bigram merges over UTF-8
//            characters, spaces as U+2581, byte fallback <0xXX>.
//   "gpt2":  byte-level BPE; merge ranks, GPT-2 byte-to-unicode mapping, and
//            the pre-tokenizer named by tokenizer.ggml.pre: "gpt2"/"gpt-2"/
//            "default"/absent -> GPT-2's pattern; "llama3"/"llama-bpe"/
//            "llama-v3"/"smaug-bpe" -> Llama 3's; "qwen2"; "deepseek-v3";
//            "gpt-4o" (o200k); anything else is refused, naming these.
// Differences from llama.cpp, both deliberate: a missing or "default" pre is
// GPT-2's own pattern (llama.cpp uses a legacy approximation there), and
// malformed UTF-8 bytes are kept as bytes (llama.cpp turns them into U+FFFD),
// so decode(encode(x)) == x for any bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/gguf.hpp"

namespace epyctune::engine {

class Tokenizer {
 public:
  enum class Kind { Spm, Bpe };
  // GGUF token types (tokenizer.ggml.token_type), numbered as llama.cpp.
  enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6
  };

  // Throws gguf::FormatError naming the key when the metadata is missing,
  // mistyped or inconsistent (array lengths, ids out of range, unknown model).
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);
  ~Tokenizer();

  // Token ids of text. add_bos: prepend BOS when the vocabulary asks for it
  // (tokenizer.ggml.add_bos_token; default true for "llama", false for "gpt2").
  // User-defined token texts always become their token; control token texts
  // ("<|im_start|>") do only with parse_special, as llama.cpp's
  // parse_special: a chat template's markup does, a user's text does not.
  std::vector<int32_t> encode(std::string_view text, bool add_bos,
                              bool parse_special = false) const;
  // The bytes a token stands for; control tokens give "" unless special.
  std::string token_to_piece(int32_t id, bool special = false) const;
  // Concatenated pieces; with a leading-space-prefix vocabulary the space that
  // encode() added is removed again, so decode(encode(x, false)) == x.
  std::string decode(std::span<const int32_t> ids, bool special = false) const;

  int32_t bos() const;
  int32_t eos() const;
  int32_t unk() const;  // -1 when the vocabulary has none
  int32_t pad() const;  // -1 when the vocabulary has none
  int n_vocab() const;
  int32_t eot() const;            // end of turn; -1 when the vocabulary has none
  bool is_eog(int32_t id) const;  // end of generation: eos, eot, eom, and their kin
  std::vector<int32_t> eog_ids() const;
  // The model's Jinja chat template (tokenizer.chat_template), "" when it has none.
  const std::string& chat_template() const;
  Kind kind() const;
  bool add_bos() const;
  // The token's text as stored in the vocabulary ("▁the", "<0x0A>", "Ġthe").
  const std::string& token_text(int32_t id) const;
  TokenType token_type(int32_t id) const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace epyctune::engine
