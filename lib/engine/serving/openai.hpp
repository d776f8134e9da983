// The OpenAI-compatible request and reply bodies of `serve`: /v1/completions
// and /v1/chat/completions requests parsed and checked field by field, and
// the reply objects (whole, streamed chunks, errors) built as OpenAI's are.
// No HTTP here: the server (http_server.cpp) wires these to lib/http.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling/sampler.hpp"
#include "engine/tokenizer/tokenizer.hpp"

namespace epyctune::engine::serving {

// A request the server refuses, with OpenAI's error fields.
struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message, std::string param = "", std::string code = "",
           std::string type = "invalid_request_error");
  int status;
  std::string param, code, type;
};
// {"error": {"message", "type", "param", "code"}} (param and code null when empty).
nlohmann::json error_body(const ApiError& e);

enum class Endpoint { completions, chat };

// Request bodies nest at most this deep: a request needs 4-5 levels, and the
// limit is checked before parsing, so depth costs no stack.
inline constexpr size_t kMaxJsonDepth = 64;
// A request body as a JSON object, or ApiError (400): too deep, not JSON,
// not an object.
nlohmann::json parse_body(std::string_view text);

struct ChatMessage {
  std::string role;  // system | user | assistant | developer | tool
  std::string content;
};

struct CompletionRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;                  // as sent; the server answers with its own name
  std::string prompt;                 // completions
  std::vector<ChatMessage> messages;  // chat
  std::optional<int> max_tokens;      // absent: the endpoint's default
  sampling::SamplerParams sampler;    // temperature defaults to OpenAI's 1
  bool seed_given = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // llama.cpp's extension: run to max_tokens
};

// Parses and checks one request body. Throws ApiError (400) naming the field
// for malformed JSON, a wrong type or value, and for what the engine does not
// do (n > 1, echo, logprobs, penalties, tools and tool_choice, a
// response_format other than text).
CompletionRequest parse_request(Endpoint endpoint, std::string_view body);

// The fallback chat prompt, for a model without tokenizer.chat_template:
// every message becomes "Role: content" followed by a blank line, and the
// prompt ends with "Assistant:" for the model to continue (docs/serve.md).
std::string render_chat(const std::vector<ChatMessage>& messages);

// The chat prompt's token ids: the model's template family (engine/chat)
// renders the messages, its markup encoded as special tokens; a model with
// no template gets render_chat's text. chat_template (a family name, serve's
// --chat-template) overrides the model's. Throws ApiError (500) when the
// model's template is none the engine renders and no override is given.
std::vector<int32_t> chat_prompt_tokens(const Tokenizer& tok,
                                        const std::vector<ChatMessage>& messages,
                                        std::string_view chat_template = "");

// llama-server's POST /tokenize: {"content", "add_special", "with_pieces"}.
struct TokenizeRequest {
  std::string content;
  bool add_special = false;
  bool with_pieces = false;
};
TokenizeRequest parse_tokenize(std::string_view body);
// {"tokens": [id...]}, or with pieces [{"id", "piece"}] where a piece that is
// not valid UTF-8 is given as its bytes, as llama-server does.
nlohmann::json tokenize_reply(const Tokenizer& tok, const TokenizeRequest& r);
// POST /detokenize: {"tokens": [id...]}, each id checked against n_vocab.
std::vector<int32_t> parse_detokenize(std::string_view body, int n_vocab);

struct ReplyMeta {
  std::string id;  // cmpl-... or chatcmpl-...
  int64_t created = 0;
  std::string model;
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

nlohmann::json usage_json(const Usage& u);
// The whole reply of a non-streaming request.
nlohmann::json completion_reply(Endpoint e, const ReplyMeta& m, const std::string& text,
                                const std::string& finish_reason, const Usage& u);
// One streamed chunk: text (chat: delta.content) and, on the last, the finish
// reason. chat_role: the chat stream's first chunk, delta {"role":"assistant"}.
nlohmann::json stream_chunk(Endpoint e, const ReplyMeta& m, const std::string& text,
                            const std::string& finish_reason, bool chat_role = false);
// The usage chunk stream_options.include_usage asks for: no choices.
nlohmann::json usage_chunk(Endpoint e, const ReplyMeta& m, const Usage& u);
// "data: {json}\n\n", with invalid UTF-8 replaced by U+FFFD.
std::string sse_event(const nlohmann::json& j);
// j.dump() with invalid UTF-8 replaced by U+FFFD (token pieces may split a
// character; the stream holds incomplete ones back, a stop or the end may not).
std::string dump(const nlohmann::json& j);

}  // namespace epyctune::engine::serving
