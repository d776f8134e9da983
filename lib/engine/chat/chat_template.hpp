// Chat prompts in the format a model was trained on. A GGUF carries its
// Jinja template in tokenizer.chat_template; rather than run Jinja, the
// engine recognises the template's family from its text and renders that
// family's format itself, byte for byte as the template would for plain
// system/user/assistant messages (no tools, no images).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.hpp"

namespace epyctune::engine::chat {

enum class Family { ChatML, Llama3, DeepSeek, Harmony };

struct Message {
  std::string role;  // system, user or assistant
  std::string content;
};

// Details of a family that vary between its templates.
struct Style {
  Family family = Family::ChatML;
  std::string default_system;  // ChatML: Qwen2.5 adds one when no system message is given
  std::string bos;             // Llama 3, DeepSeek: the template's bos_token
  bool dated_system = false;   // Llama 3.1+: a system turn with the knowledge and today's dates
  bool think = false;          // DeepSeek R1: the assistant turn opens with "<think>\n"
  std::string date;  // harmony's "Current date", Llama 3.1+'s "Today Date"; style_for sets it
};

std::string_view family_name(Family f);
// "chatml", "llama3", "deepseek", "harmony"; nullopt for anything else.
std::optional<Family> family_from_name(std::string_view name);
// The family a tokenizer.chat_template text belongs to; nullopt when none.
std::optional<Family> detect_family(std::string_view jinja);

// The style for a model's template, or for override_name when it is given.
// Throws std::runtime_error naming the fix (--chat-template NAME) when the
// template is missing or unrecognised and no override is given.
Style style_for(std::string_view jinja, std::string_view override_name);

// The prompt text: every message, then the assistant's turn opened when
// add_generation_prompt. Encode it with parse_special and without adding BOS
// (the text carries it where the template does).
std::string render(const Style& s, std::span<const Message> messages, bool add_generation_prompt);

// generate --chat: an optional system message and one user message in the
// tokenizer's template (or override_name's), encoded with the assistant's
// turn opened. Throws std::runtime_error as style_for.
std::vector<int32_t> prompt_tokens(const Tokenizer& tok, std::string_view system,
                                   std::string_view user, std::string_view override_name);

}  // namespace epyctune::engine::chat
