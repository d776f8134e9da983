#include "engine/chat/chat_template.hpp"

#include <fmt/format.h>

#include <ctime>
#include <stdexcept>

#include "common/field_error.hpp"

namespace epyctune::engine::chat {
namespace {

bool has(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

// Today's date as the templates' strftime_now gives it.
std::string today(const char* fmt) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, fmt, &tm);
  return buf;
}

std::string trim(std::string_view s) {
  const auto ws = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// <|im_start|>role\ncontent<|im_end|>\n per message (Qwen's templates).
std::string render_chatml(const Style& s, std::span<const Message> msgs, bool gen) {
  std::string out;
  if (!s.default_system.empty() && (msgs.empty() || msgs.front().role != "system"))
    out += "<|im_start|>system\n" + s.default_system + "<|im_end|>\n";
  for (const auto& m : msgs) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

// Llama 3's template trims each message's content.
// Llama 3.1 and later always open with a system turn that carries the dates,
// the first system message's text after them.
std::string render_llama3(const Style& s, std::span<const Message> msgs, bool gen) {
  std::string out = s.bos;
  if (s.dated_system) {
    std::string system;
    if (!msgs.empty() && msgs.front().role == "system") {
      system = trim(msgs.front().content);
      msgs = msgs.subspan(1);
    }
    out +=
        "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December "
        "2023\nToday Date: " +
        s.date + "\n\n" + system + "<|eot_id|>";
  }
  for (const auto& m : msgs)
    out +=
        "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// R1's template drops the reasoning of earlier replies: only what follows
// </think> is kept.
std::string visible_answer(const Style& s, const std::string& content) {
  const size_t end = content.rfind("</think>");
  if (!s.think || end == std::string::npos) return content;
  return content.substr(end + 8);
}

// DeepSeek V3/R1: the system prompts go first with no markup, user and
// assistant turns are tagged with full-width bars.
std::string render_deepseek(const Style& s, std::span<const Message> msgs, bool gen) {
  std::string system;
  for (const auto& m : msgs)
    if (m.role == "system") system += (system.empty() ? "" : "\n\n") + m.content;
  std::string out = s.bos + system;
  for (const auto& m : msgs) {
    if (m.role == "user")
      out += "<｜User｜>" + m.content;
    else if (m.role == "assistant")
      out += "<｜Assistant｜>" + visible_answer(s, m.content) + "<｜end▁of▁sentence｜>";
  }
  if (gen) out += s.think ? "<｜Assistant｜><think>\n" : "<｜Assistant｜>";
  return out;
}

// OpenAI's harmony format (gpt-oss): a fixed system message, the user's
// system prompt as developer instructions, assistant replies on the final channel.
std::string render_harmony(const Style& s, std::span<const Message> msgs, bool gen) {
  std::string out =
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\n";
  if (!s.date.empty()) out += "Current date: " + s.date + "\n";
  out +=
      "\nReasoning: medium\n\n"
      "# Valid channels: analysis, commentary, final. Channel must be included for every "
      "message.<|end|>";
  for (const auto& m : msgs) {
    if (m.role == "system")
      out += "<|start|>developer<|message|># Instructions\n\n" + m.content + "\n\n<|end|>";
    else if (m.role == "user")
      out += "<|start|>user<|message|>" + m.content + "<|end|>";
    else if (m.role == "assistant")
      out += "<|start|>assistant<|channel|>final<|message|>" + m.content + "<|end|>";
  }
  if (gen) out += "<|start|>assistant";
  return out;
}

}  // namespace

std::string_view family_name(Family f) {
  switch (f) {
    case Family::ChatML:
      return "chatml";
    case Family::Llama3:
      return "llama3";
    case Family::DeepSeek:
      return "deepseek";
    case Family::Harmony:
      return "harmony";
  }
  return "?";
}

std::optional<Family> family_from_name(std::string_view name) {
  for (Family f : {Family::ChatML, Family::Llama3, Family::DeepSeek, Family::Harmony})
    if (family_name(f) == name) return f;
  return std::nullopt;
}

std::optional<Family> detect_family(std::string_view t) {
  if (has(t, "<|channel|>") && has(t, "<|message|>")) return Family::Harmony;
  if (has(t, "<|im_start|>")) return Family::ChatML;
  if (has(t, "<|start_header_id|>") && has(t, "<|eot_id|>")) return Family::Llama3;
  if (has(t, "<｜Assistant｜>") && has(t, "<｜User｜>")) return Family::DeepSeek;
  return std::nullopt;
}

Style style_for(std::string_view jinja, std::string_view override_name) {
  Style s;
  if (!override_name.empty()) {
    const auto f = family_from_name(override_name);
    if (!f)
      throw common::FieldError(
          "chat_template",
          fmt::format("{}: unknown; use chatml, llama3, deepseek or harmony", override_name));
    s.family = *f;
  } else {
    const auto f = detect_family(jinja);
    if (!f)
      throw common::FieldError(
          "chat_template",
          jinja.empty() ? "the model has no tokenizer.chat_template; name one (chatml, llama3, "
                          "deepseek, harmony)"
                        : "the model's tokenizer.chat_template is none of the families the "
                          "engine renders; name the one it follows (chatml, llama3, deepseek, "
                          "harmony)");
    s.family = *f;
  }
  if (s.family == Family::ChatML && has(jinja, "You are Qwen, created by Alibaba Cloud."))
    s.default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
  if (s.family == Family::Llama3) {
    s.bos = "<|begin_of_text|>";
    s.dated_system = has(jinja, "Cutting Knowledge Date");
    // 3.1 fixes the date; 3.2 and 3.3 ask strftime_now for today's.
    s.date = has(jinja, "strftime_now") ? today("%d %b %Y") : "26 Jul 2024";
  }
  if (s.family == Family::DeepSeek) {
    s.bos = "<｜begin▁of▁sentence｜>";
    s.think = has(jinja, "<｜Assistant｜><think>\\n");  // the Jinja source spells \n
  }
  if (s.family == Family::Harmony) s.date = today("%Y-%m-%d");  // its strftime_now
  return s;
}

std::string render(const Style& s, std::span<const Message> msgs, bool gen) {
  switch (s.family) {
    case Family::ChatML:
      return render_chatml(s, msgs, gen);
    case Family::Llama3:
      return render_llama3(s, msgs, gen);
    case Family::DeepSeek:
      return render_deepseek(s, msgs, gen);
    case Family::Harmony:
      return render_harmony(s, msgs, gen);
  }
  return {};
}

std::vector<int32_t> prompt_tokens(const Tokenizer& tok, std::string_view system,
                                   std::string_view user, std::string_view override_name) {
  const Style s = style_for(tok.chat_template(), override_name);
  std::vector<Message> msgs;
  if (!system.empty()) msgs.push_back({"system", std::string(system)});
  msgs.push_back({"user", std::string(user)});
  return tok.encode(render(s, msgs, true), false, true);
}

}  // namespace epyctune::engine::chat
