// /v1/chat/completions prompts: the model's chat template family renders the
// messages and its markup becomes special tokens; a model without a template
// gets the fallback text; an unrecognised template is refused by name.
#include <doctest/doctest.h>

#include "engine/serving/openai.hpp"
#include "engine/synth/gguf_writer.hpp"
#include "engine/tokenizer/unicode.hpp"
#include "test_util.hpp"

using namespace epyctune::engine;
using serving::ChatMessage;

namespace {

// Byte tokens (id == byte), then ChatML's two control tokens.
std::unique_ptr<Tokenizer> chatml_vocab(const std::string& tmpl,
                                        std::unique_ptr<gguf::File>& keep) {
  static epyctune::testing::TempDir dir;
  static int n = 0;
  const auto path = dir.path() / ("v" + std::to_string(n++) + ".gguf");
  std::vector<std::string> tokens;
  std::vector<int32_t> types(256, 1);
  for (int b = 0; b < 256; ++b) tokens.push_back(unicode::byte_to_unicode(static_cast<uint8_t>(b)));
  tokens.push_back("<|im_start|>");  // 256
  tokens.push_back("<|im_end|>");    // 257
  types.push_back(3);
  types.push_back(3);
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", {});
  w.set_u32("tokenizer.ggml.eos_token_id", 257);
  if (!tmpl.empty()) w.set_string("tokenizer.chat_template", tmpl);
  w.begin(path);
  w.finish();
  keep = gguf::File::open(path);
  return Tokenizer::from_gguf(*keep);
}

const std::vector<ChatMessage> kMsgs{{"developer", "Be brief."}, {"user", "Hi"}};

}  // namespace

TEST_CASE("chat prompt: the model's ChatML template, its markup as control tokens") {
  std::unique_ptr<gguf::File> keep;
  auto tok = chatml_vocab("{% for m in messages %}<|im_start|>{{ m.role }}", keep);
  const auto ids = serving::chat_prompt_tokens(*tok, kMsgs);
  CHECK(ids == tok->encode("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi"
                           "<|im_end|>\n<|im_start|>assistant\n",
                           false, true));
  CHECK(std::count(ids.begin(), ids.end(), 256) == 3);
  CHECK(std::count(ids.begin(), ids.end(), 257) == 2);
  CHECK(tok->is_eog(257));
}

TEST_CASE("chat prompt: fallback text without a template, refusal for an unknown one") {
  std::unique_ptr<gguf::File> keep;
  auto plain = chatml_vocab("", keep);
  CHECK(serving::chat_prompt_tokens(*plain, kMsgs) ==
        plain->encode(serving::render_chat(kMsgs), true));
  std::unique_ptr<gguf::File> keep2;
  auto odd = chatml_vocab("[INST] {{ content }} [/INST]", keep2);
  try {
    (void)serving::chat_prompt_tokens(*odd, kMsgs);
    FAIL("an unrecognised template must be refused");
  } catch (const serving::ApiError& e) {
    CHECK(e.status == 500);
    CHECK(std::string(e.what()).find("name the one it follows") != std::string::npos);
  }
  // --chat-template names the format the template follows.
  CHECK(serving::chat_prompt_tokens(*odd, kMsgs, "chatml")[0] == 256);
}
