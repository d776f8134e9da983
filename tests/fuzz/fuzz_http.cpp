// libFuzzer target: serve's request path on arbitrary bytes. The bytes are
// what a client sends on one connection: lib/http's parser (the server's
// own, under small limits) takes the requests out one after another, as
// for pipelined requests, and each body goes through the OpenAI request
// checks of every endpoint (completions, chat, tokenize, detokenize). A
// clean refusal is a ReadFailure or an ApiError; anything else (a crash, a
// sanitizer report, another exception, a broken invariant below) is a
// finding.
#include <cstdlib>
#include <string>

#include "engine/serving/openai.hpp"
#include "http/message.hpp"

using namespace epyctune;
using engine::serving::ApiError;
using engine::serving::Endpoint;

namespace {

http::Limits small_limits() {
  http::Limits l;
  l.header_bytes = 1024;
  l.body_bytes = 4096;
  return l;
}

void check_body(const std::string& body) {
  try {
    engine::serving::parse_request(Endpoint::completions, body);
  } catch (const ApiError& e) {
    if (e.status != 400) std::abort();
  }
  try {
    const auto r = engine::serving::parse_request(Endpoint::chat, body);
    if (r.messages.empty()) std::abort();  // a chat request it accepted has messages
  } catch (const ApiError& e) {
    if (e.status != 400) std::abort();
  }
  try {
    engine::serving::parse_tokenize(body);
  } catch (const ApiError& e) {
    if (e.status != 400) std::abort();
  }
  try {
    for (int32_t id : engine::serving::parse_detokenize(body, 1000))
      if (id < 0 || id >= 1000) std::abort();
  } catch (const ApiError& e) {
    if (e.status != 400) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const http::Limits limits = small_limits();
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (int i = 0; i < 8 && !bytes.empty(); ++i) {
    const http::ParseResult r = http::parse_one(bytes, limits);
    if (r.consumed > bytes.size()) std::abort();
    if (r.failure) {
      const int s = r.failure->status;
      if (s != 400 && s != 408 && s != 413 && s != 431 && s != 501 && s != 505) std::abort();
      if (r.request) std::abort();
      return 0;
    }
    if (!r.request) return 0;  // the bytes end mid-request
    if (r.request->body.size() > limits.body_bytes) std::abort();
    if (r.request->version != 10 && r.request->version != 11) std::abort();
    // What the server would send back is framed by these: never throws.
    http::Reply reply;
    reply.body = r.request->body;
    http::format_head(reply, reply.body.size(), r.request->version, r.request->keep_alive);
    check_body(r.request->body);
    if (r.consumed == 0) std::abort();  // a whole request takes bytes
    bytes.remove_prefix(r.consumed);
  }
  return 0;
}
