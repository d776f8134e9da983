// Models for the serve tests, written once per test binary into a TempDir:
// the synth library's tiny model, a planted draft for it, and a slower
// model whose completions last long enough to fill a queue.
#pragma once

#include <httplib.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/runtime/thread_pool.hpp"
#include "engine/synth/draft_pair.hpp"
#include "engine/synth/mkmodel.hpp"
#include "test_util.hpp"

namespace epyctune::testing {

struct ServeModels {
  TempDir dir;
  std::string tiny = (dir.path() / "tiny.gguf").string();
  std::string draft = (dir.path() / "draft.gguf").string();
  std::string slow = (dir.path() / "slow.gguf").string();

  ServeModels() {
    using namespace epyctune::engine;
    WriteOptions wo;
    wo.quant = "q8_0";
    wo.threads = 1;
    write_model(tiny, parse_shape("tiny"), wo);
    // Four times tiny's width, twice its layers, a long context: a completion
    // of thousands of tokens runs for seconds on one thread, long enough to
    // fill a queue behind it.
    write_model(slow,
                parse_shape("dim=256,layers=4,heads=4,kv_heads=4,ffn=768,vocab=512,ctx=16384"), wo);
    auto pool = runtime::ThreadPool::unpinned(1);
    PairOptions po;
    po.agreement = 0.6;
    po.sequences = 4;
    po.steps = 8;
    po.max_iterations = 4;
    write_draft_pair(tiny, draft, po, pool);
  }
  static ServeModels& get() {
    static ServeModels m;
    return m;
  }
};

// EPYCTUNE_TEST_ENGINE_BIN runs the tests against another build of the
// engine, e.g. one from an older commit, to show what a test catches.
inline std::string engine_bin() {
  const char* other = std::getenv("EPYCTUNE_TEST_ENGINE_BIN");
  return other && *other ? other : EPYCTUNE_ENGINE_BIN;
}

// `generate --json` for the same prompt: its text (greedy).
inline std::string generate_text(const std::string& model, const std::string& prompt, int n,
                                 const std::string& extra = "") {
  const std::string cmd = engine_bin() + " generate -m " + model + " -t 1 --temp 0 --json -n " +
                          std::to_string(n) + " " + extra + " -p '" + prompt + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t k; (k = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, k);
  ::pclose(p);
  return nlohmann::json::parse(out)["text"].get<std::string>();
}

// The text of an SSE stream's deltas, and whether it ended with [DONE].
struct SseText {
  std::string text, finish_reason;
  bool done = false;
  int events = 0;
  nlohmann::json usage;
};
inline SseText parse_sse(const std::string& body, bool chat) {
  SseText s;
  for (size_t pos = 0; (pos = body.find("data: ", pos)) != std::string::npos;) {
    const size_t end = body.find("\n\n", pos);
    const std::string data = body.substr(pos + 6, end - pos - 6);
    pos = end;
    ++s.events;
    if (data == "[DONE]") {
      s.done = true;
      continue;
    }
    const auto j = nlohmann::json::parse(data);
    if (j.contains("usage")) s.usage = j["usage"];
    if (j["choices"].empty()) continue;
    const auto& c = j["choices"][0];
    if (chat && c["delta"].contains("content")) s.text += c["delta"]["content"].get<std::string>();
    if (!chat) s.text += c["text"].get<std::string>();
    if (!c["finish_reason"].is_null()) s.finish_reason = c["finish_reason"];
  }
  return s;
}

}  // namespace epyctune::testing
