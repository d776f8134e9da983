#include "engine/serving/openai.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/text.hpp"
#include "engine/chat/chat_template.hpp"

namespace epyctune::engine::serving {
namespace {

using nlohmann::json;

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError(400, message, param);
}

// A client's value in an error message: scalars as they are (strings cut
// short), containers by kind. Never a recursive dump: the value is the
// client's, nested as deep as it likes.
std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "a list";
    case json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      std::string out = s.size() > 40 ? s.substr(0, 40) + "..." : s;
      return json(out).dump(-1, ' ', false, json::error_handler_t::replace);
    }
    default:
      return v.dump();  // a number, a boolean or null: flat
  }
}

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number_in(const json& body, const char* name, double lo, double hi, bool lo_open,
                 double dflt) {
  const json* v = field(body, name);
  if (!v) return dflt;
  const std::string range = fmt::format("{}{:g}, {:g}]", lo_open ? "(" : "[", lo, hi);
  if (!v->is_number()) throw bad(name, std::string("'") + name + "' must be a number in " + range);
  const double d = v->get<double>();
  if (!std::isfinite(d) || d > hi || d < lo || (lo_open && d == lo))
    throw bad(name, std::string("'") + name + "' must be in " + range + ", got " + describe(*v));
  return d;
}

std::optional<int64_t> integer(const json& body, const char* name, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer())
    throw bad(name, std::string("'") + name + "' must be an integer, got " + describe(*v));
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
    throw bad(name, std::string("'") + name + "' must be at most " + std::to_string(hi));
  const int64_t i = v->get<int64_t>();
  if (i < lo || i > hi)
    throw bad(name, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " +
                        std::to_string(hi) + ", got " + std::to_string(i));
  return i;
}

bool boolean(const json& body, const char* name, bool dflt) {
  const json* v = field(body, name);
  if (!v) return dflt;
  if (!v->is_boolean())
    throw bad(name, std::string("'") + name + "' must be true or false, got " + describe(*v));
  return v->get<bool>();
}

std::string prompt_of(const json& body) {
  const json* p = field(body, "prompt");
  if (!p) throw bad("prompt", "'prompt' is required (a string)");
  if (p->is_string()) return p->get<std::string>();
  if (p->is_array()) {
    if (p->size() != 1 || !(*p)[0].is_string())
      throw bad("prompt",
                "'prompt' as a list must hold exactly one string: one prompt per request");
    return (*p)[0].get<std::string>();
  }
  throw bad("prompt", "'prompt' must be a string or a list of one string");
}

std::string content_of(const json& c, size_t i) {
  const std::string param = "messages[" + std::to_string(i) + "].content";
  if (c.is_null()) return "";
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw bad(param, "'" + param + "' must be a string or a list of text parts");
  std::string out;
  for (const auto& part : c) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw bad(param, "'" + param + "' parts must be {\"type\": \"text\", \"text\": string}");
    out += part["text"].get<std::string>();
  }
  return out;
}

std::vector<ChatMessage> messages_of(const json& body) {
  const json* m = field(body, "messages");
  if (!m || !m->is_array() || m->empty())
    throw bad("messages", "'messages' must be a non-empty list of {role, content}");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) throw bad(param, "'" + param + "' must be an object {role, content}");
    auto role = msg.find("role");
    static const char* kRoles[] = {"system", "user", "assistant", "developer", "tool"};
    if (role == msg.end() || !role->is_string() ||
        std::find(std::begin(kRoles), std::end(kRoles), role->get<std::string>()) ==
            std::end(kRoles))
      throw bad(param + ".role",
                "'" + param + ".role' must be system, user, assistant, developer or tool");
    auto content = msg.find("content");
    out.push_back(
        {role->get<std::string>(), content_of(content == msg.end() ? json() : *content, i)});
  }
  return out;
}

std::vector<std::string> stops_of(const json& body) {
  const json* s = field(body, "stop");
  if (!s) return {};
  std::vector<std::string> out;
  if (s->is_string()) {
    out.push_back(s->get<std::string>());
  } else if (s->is_array() && s->size() <= 4) {
    for (const auto& x : *s) {
      if (!x.is_string()) throw bad("stop", "'stop' must list strings");
      out.push_back(x.get<std::string>());
    }
  } else {
    throw bad("stop", "'stop' must be a string or a list of up to 4 strings");
  }
  for (const auto& x : out)
    if (x.empty()) throw bad("stop", "'stop' strings must not be empty");
  return out;
}

// Fields the engine cannot honour are refused rather than ignored.
void refuse_unsupported(const json& body) {
  if (auto n = integer(body, "n", 1, 128); n && *n != 1)
    throw bad("n", "'n' must be 1: one completion per request");
  if (auto b = integer(body, "best_of", 1, 128); b && *b != 1)
    throw bad("best_of", "'best_of' must be 1");
  if (boolean(body, "echo", false)) throw bad("echo", "'echo' is not supported: leave it false");
  if (const json* lp = field(body, "logprobs"); lp && !(lp->is_boolean() && !lp->get<bool>()))
    throw bad("logprobs", "'logprobs' is not supported");
  for (const char* p : {"presence_penalty", "frequency_penalty"})
    if (number_in(body, p, -2.0, 2.0, false, 0.0) != 0.0)
      throw bad(p, std::string("'") + p + "' is not supported: leave it 0");
  // A client that asks for a tool call or for JSON must not get prose it
  // takes for an answer.
  for (const char* p :
       {"tools", "tool_choice", "functions", "function_call", "parallel_tool_calls"})
    if (field(body, p))
      throw bad(p, std::string("'") + p +
                       "' is not supported: this server does not call tools; remove the field");
  if (const json* rf = field(body, "response_format")) {
    const json* type = rf->is_object() ? field(*rf, "type") : nullptr;
    if (!type || !type->is_string() || type->get<std::string>() != "text")
      throw bad("response_format",
                "'response_format' other than {\"type\": \"text\"} is not supported: this "
                "server does not constrain output to JSON");
  }
}

}  // namespace

nlohmann::json parse_body(std::string_view text) {
  if (const size_t d = common::json_depth(text); d > kMaxJsonDepth)
    throw ApiError(400,
                   "the body nests " + std::to_string(d) + " levels deep; the limit is " +
                       std::to_string(kMaxJsonDepth),
                   "", "invalid_json");
  json body = json::parse(text, nullptr, false);
  if (body.is_discarded()) throw ApiError(400, "the body is not valid JSON", "", "invalid_json");
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object", "", "invalid_json");
  return body;
}

ApiError::ApiError(int s, const std::string& message, std::string p, std::string c, std::string t)
    : std::runtime_error(message),
      status(s),
      param(std::move(p)),
      code(std::move(c)),
      type(std::move(t)) {}

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

CompletionRequest parse_request(Endpoint endpoint, std::string_view text) {
  const json body = parse_body(text);
  CompletionRequest r;
  r.endpoint = endpoint;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) throw bad("model", "'model' must be a string");
    r.model = m->get<std::string>();
  }
  if (endpoint == Endpoint::chat)
    r.messages = messages_of(body);
  else
    r.prompt = prompt_of(body);
  const char* max_name =
      field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (auto mt = integer(body, max_name, 0, std::numeric_limits<int>::max()))
    r.max_tokens = static_cast<int>(*mt);
  r.sampler.temperature = static_cast<float>(number_in(body, "temperature", 0.0, 2.0, false, 1.0));
  r.sampler.top_p = static_cast<float>(number_in(body, "top_p", 0.0, 1.0, true, 1.0));
  r.sampler.min_p = static_cast<float>(number_in(body, "min_p", 0.0, 1.0, false, 0.0));
  r.sampler.top_k = static_cast<int>(integer(body, "top_k", 0, 1 << 30).value_or(0));
  if (auto seed = integer(body, "seed", std::numeric_limits<int64_t>::min(),
                          std::numeric_limits<int64_t>::max())) {
    r.sampler.seed = static_cast<uint64_t>(*seed);
    r.seed_given = true;
  }
  r.stop = stops_of(body);
  r.stream = boolean(body, "stream", false);
  r.ignore_eos = boolean(body, "ignore_eos", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw bad("stream_options", "'stream_options' must be an object");
    r.include_usage = boolean(*so, "include_usage", false);
  }
  refuse_unsupported(body);
  return r;
}

std::string render_chat(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) {
    std::string role = m.role;
    role[0] = static_cast<char>(role[0] - 'a' + 'A');
    out += role + ": " + m.content + "\n\n";
  }
  return out + "Assistant:";
}

std::vector<int32_t> chat_prompt_tokens(const Tokenizer& tok,
                                        const std::vector<ChatMessage>& messages,
                                        std::string_view chat_template) {
  if (tok.chat_template().empty() && chat_template.empty())
    return tok.encode(render_chat(messages), true);
  chat::Style style;
  try {
    style = chat::style_for(tok.chat_template(), chat_template);
  } catch (const std::exception& e) {
    throw ApiError(500, e.what(), "", "unsupported_chat_template", "server_error");
  }
  std::vector<chat::Message> msgs;
  msgs.reserve(messages.size());
  // OpenAI's newer "developer" role is the system prompt to these templates.
  for (const auto& m : messages)
    msgs.push_back({m.role == "developer" ? "system" : m.role, m.content});
  return tok.encode(chat::render(style, msgs, true), false, true);
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

namespace {
json reply_head(const char* object, const ReplyMeta& m) {
  return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}};
}
json finish_json(const std::string& f) {
  return f.empty() ? json(nullptr) : json(f);
}
}  // namespace

json completion_reply(Endpoint e, const ReplyMeta& m, const std::string& text,
                      const std::string& finish_reason, const Usage& u) {
  const bool chat = e == Endpoint::chat;
  json j = reply_head(chat ? "chat.completion" : "text_completion", m);
  json choice = {{"index", 0}, {"finish_reason", finish_json(finish_reason)}};
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(u);
  return j;
}

json stream_chunk(Endpoint e, const ReplyMeta& m, const std::string& text,
                  const std::string& finish_reason, bool chat_role) {
  const bool chat = e == Endpoint::chat;
  json j = reply_head(chat ? "chat.completion.chunk" : "text_completion", m);
  json choice = {{"index", 0}, {"finish_reason", finish_json(finish_reason)}};
  if (chat) {
    json delta = json::object();
    if (chat_role) delta["role"] = "assistant";
    if (chat_role || !text.empty()) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  j["choices"] = json::array({choice});
  return j;
}

json usage_chunk(Endpoint e, const ReplyMeta& m, const Usage& u) {
  json j = reply_head(e == Endpoint::chat ? "chat.completion.chunk" : "text_completion", m);
  j["choices"] = json::array();
  j["usage"] = usage_json(u);
  return j;
}

TokenizeRequest parse_tokenize(std::string_view text) {
  const json body = parse_body(text);
  const json* c = field(body, "content");
  if (!c || !c->is_string()) throw bad("content", "'content' is required (a string)");
  TokenizeRequest r;
  r.content = c->get<std::string>();
  r.add_special = boolean(body, "add_special", false);
  r.with_pieces = boolean(body, "with_pieces", false);
  return r;
}

json tokenize_reply(const Tokenizer& tok, const TokenizeRequest& r) {
  const std::vector<int32_t> ids = tok.encode(r.content, r.add_special && tok.add_bos());
  json tokens = json::array();
  for (int32_t id : ids) {
    if (!r.with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string piece = tok.token_to_piece(id, true);
    json p;
    if (common::is_valid_utf8(piece)) {
      p = piece;
    } else {
      p = json::array();
      for (unsigned char b : piece) p.push_back(b);
    }
    tokens.push_back({{"id", id}, {"piece", p}});
  }
  return {{"tokens", tokens}};
}

std::vector<int32_t> parse_detokenize(std::string_view text, int n_vocab) {
  const json body = parse_body(text);
  const json* t = field(body, "tokens");
  if (!t || !t->is_array()) throw bad("tokens", "'tokens' is required (a list of token ids)");
  std::vector<int32_t> ids;
  ids.reserve(t->size());
  for (size_t i = 0; i < t->size(); ++i) {
    const json& v = (*t)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= n_vocab)
      throw bad("tokens", "'tokens[" + std::to_string(i) + "]' must be a token id in [0, " +
                              std::to_string(n_vocab) + "), got " + describe(v));
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& j) {
  return "data: " + dump(j) + "\n\n";
}

}  // namespace epyctune::engine::serving
