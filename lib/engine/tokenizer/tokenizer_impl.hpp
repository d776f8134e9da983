// Tokenizer internals shared by the loader, the SPM and the BPE encoders.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/tokenizer.hpp"

namespace epyctune::engine {

enum class PreTokenizer { Gpt2, Llama3, Qwen2, DeepseekV3, Gpt4o };

struct Tokenizer::Impl {
  Kind kind = Kind::Spm;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<TokenType> types;
  std::unordered_map<std::string_view, int32_t> token_to_id;  // views into tokens
  // BPE: "left right" (the GGUF merges strings) -> rank; views into merges.
  std::vector<std::string> merges;
  std::unordered_map<std::string_view, int32_t> merge_rank;
  PreTokenizer pre = PreTokenizer::Gpt2;
  bool ignore_merges = false;  // llama3: a pre-token that is a whole token is not merged
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;
  bool add_bos = true;
  bool add_space_prefix = true;
  int32_t byte_token[256];            // SPM <0xXX> ids, -1 where missing
  std::vector<int32_t> user_defined;  // matched verbatim in input, longest first
  std::vector<int32_t> specials;      // user-defined and control, longest first
  std::vector<bool> eog;
  int32_t eot = -1, eom = -1;
  std::string chat_template;  // tokenizer.chat_template, "" when absent

  int32_t find(std::string_view s) const {
    auto it = token_to_id.find(s);
    return it == token_to_id.end() ? -1 : it->second;
  }
  // One raw-text fragment (no user-defined tokens inside) appended to out.
  void encode_spm(std::string_view text, std::vector<int32_t>& out) const;
  void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
};

// Splits text into pre-tokens (byte ranges of text) by the pattern's rules.
std::vector<std::string_view> pretokenize(std::string_view text, PreTokenizer kind);

}  // namespace epyctune::engine
