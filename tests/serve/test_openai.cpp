// Request checking and reply shapes of the OpenAI-compatible API.
#include <doctest/doctest.h>

#include "engine/serving/openai.hpp"

using namespace epyctune::engine::serving;
using nlohmann::json;

namespace {
// The ApiError a body gets, or status 0 when it is accepted.
ApiError refusal(Endpoint ep, const std::string& body) {
  try {
    parse_request(ep, body);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "accepted");
}
}  // namespace

TEST_CASE("completions: fields, defaults and the usual sampling parameters") {
  auto r = parse_request(Endpoint::completions,
                         R"({"model":"m","prompt":"hi","max_tokens":5,"temperature":0,
                             "top_p":0.5,"top_k":3,"seed":7,"stop":["a","b"],"n":1,
                             "echo":false,"stream":true,"ignore_eos":true,"stream_options":{"include_usage":true}})");
  CHECK(r.prompt == "hi");
  CHECK(r.max_tokens == 5);
  CHECK(r.sampler.greedy());
  CHECK(r.sampler.top_p == doctest::Approx(0.5));
  CHECK(r.sampler.top_k == 3);
  CHECK(r.sampler.seed == 7);
  CHECK(r.seed_given);
  CHECK(r.stop == std::vector<std::string>{"a", "b"});
  CHECK(r.stream);
  CHECK(r.include_usage);
  CHECK(r.ignore_eos);
  auto d = parse_request(Endpoint::completions, R"({"prompt":["one"],"stop":"x"})");
  CHECK(d.prompt == "one");
  CHECK(!d.max_tokens);
  CHECK(d.sampler.temperature == doctest::Approx(1.0));  // OpenAI's default
  CHECK(!d.seed_given);
  CHECK(d.stop == std::vector<std::string>{"x"});
  CHECK(!d.stream);
}

TEST_CASE("bad bodies, types and values are 400 naming the field") {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"prompt":)", ""},
      {R"([1,2])", ""},
      {R"({})", "prompt"},
      {R"({"prompt":5})", "prompt"},
      {R"({"prompt":["a","b"]})", "prompt"},
      {R"({"prompt":"a","max_tokens":"5"})", "max_tokens"},
      {R"({"prompt":"a","max_tokens":-1})", "max_tokens"},
      {R"({"prompt":"a","max_tokens":1.5})", "max_tokens"},
      {R"({"prompt":"a","temperature":3})", "temperature"},
      {R"({"prompt":"a","temperature":"hot"})", "temperature"},
      {R"({"prompt":"a","top_p":0})", "top_p"},
      {R"({"prompt":"a","top_k":-2})", "top_k"},
      {R"({"prompt":"a","seed":"x"})", "seed"},
      {R"({"prompt":"a","stop":[1]})", "stop"},
      {R"({"prompt":"a","stop":["a","b","c","d","e"]})", "stop"},
      {R"({"prompt":"a","stop":""})", "stop"},
      {R"({"prompt":"a","n":2})", "n"},
      {R"({"prompt":"a","echo":true})", "echo"},
      {R"({"prompt":"a","stream":"yes"})", "stream"},
      {R"({"prompt":"a","logprobs":3})", "logprobs"},
      {R"({"prompt":"a","presence_penalty":0.5})", "presence_penalty"},
      {R"({"prompt":"a","model":3})", "model"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.body);
    const ApiError e = refusal(Endpoint::completions, c.body);
    CHECK(e.status == 400);
    CHECK(e.param == c.param);
    const json b = error_body(e);
    CHECK(b["error"]["type"] == "invalid_request_error");
    CHECK(b["error"]["message"].get<std::string>().size() > 0);
    CHECK(b["error"].contains("code"));
  }
}

TEST_CASE("chat: messages are checked and rendered with the fallback template") {
  auto r = parse_request(Endpoint::chat, R"({"messages":[{"role":"system","content":"Be brief."},
      {"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"!"}]}]})");
  REQUIRE(r.messages.size() == 2);
  CHECK(render_chat(r.messages) == "System: Be brief.\n\nUser: Hi!\n\nAssistant:");
  CHECK(refusal(Endpoint::chat, R"({"messages":[]})").param == "messages");
  CHECK(refusal(Endpoint::chat, R"({"messages":[{"role":"bot","content":"x"}]})").param ==
        "messages[0].role");
  CHECK(refusal(Endpoint::chat, R"({"messages":[{"role":"user","content":5}]})").param ==
        "messages[0].content");
  CHECK(refusal(Endpoint::chat, R"({"prompt":"x"})").param == "messages");
}

TEST_CASE("replies carry OpenAI's fields") {
  const ReplyMeta m{"cmpl-1", 100, "tiny"};
  const json c = completion_reply(Endpoint::completions, m, "abc", "length", {3, 4});
  CHECK(c["object"] == "text_completion");
  CHECK(c["choices"][0]["text"] == "abc");
  CHECK(c["choices"][0]["finish_reason"] == "length");
  CHECK(c["usage"]["total_tokens"] == 7);
  const json ch = completion_reply(Endpoint::chat, m, "abc", "stop", {1, 2});
  CHECK(ch["object"] == "chat.completion");
  CHECK(ch["choices"][0]["message"]["role"] == "assistant");
  CHECK(ch["choices"][0]["message"]["content"] == "abc");
  const json first = stream_chunk(Endpoint::chat, m, "", "", true);
  CHECK(first["object"] == "chat.completion.chunk");
  CHECK(first["choices"][0]["delta"]["role"] == "assistant");
  CHECK(first["choices"][0]["finish_reason"].is_null());
  const json last = stream_chunk(Endpoint::chat, m, "", "stop");
  CHECK(last["choices"][0]["delta"].empty());
  CHECK(last["choices"][0]["finish_reason"] == "stop");
  CHECK(usage_chunk(Endpoint::completions, m, {1, 1})["choices"].empty());
  CHECK(sse_event(json{{"a", 1}}) == "data: {\"a\":1}\n\n");
  CHECK(dump(json("\xff")) == "\"\xef\xbf\xbd\"");  // invalid UTF-8 becomes U+FFFD
}
