// The load mix CI runs under ASan: every client has one kind (whole
// replies, streams, streams it cuts, bad requests, long shared prefixes),
// then /metrics must show that each request serve admitted ended: nothing
// queued or in flight, each counted with its status.
#include <httplib.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "serve_load.hpp"

namespace serve_load {
namespace {

using nlohmann::json;

enum Kind { kWhole, kStream, kCancel, kPrefix, kBad, kKinds };
constexpr const char* kKindName[kKinds] = {"whole", "stream", "cancel", "prefix", "bad"};

struct KindTally {
  int64_t sent = 0, ok = 0, busy = 0, cancelled = 0, refused = 0, errors = 0;
  int64_t cancelled_unsent = 0;  // cut right after sending: serve may never route them
};

// A request that must be refused with `expect`; raw ones go as bytes.
struct BadRequest {
  const char* name;
  const char* method;
  std::string path, body;
  int expect;
  bool raw = false;
};

using Counters = std::map<std::string, double>;

// Prometheus text: `name{labels} value` lines into a map keyed by all
// before the value.
Counters scrape(httplib::Client& c) {
  Counters m;
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return m;
  size_t at = 0;
  const std::string& b = r->body;
  while (at < b.size()) {
    size_t eol = b.find('\n', at);
    if (eol == std::string::npos) eol = b.size();
    const std::string line = b.substr(at, eol - at);
    at = eol + 1;
    const size_t sp = line.rfind(' ');
    if (line.empty() || line[0] == '#' || sp == std::string::npos) continue;
    m[line.substr(0, sp)] = std::atof(line.c_str() + sp + 1);
  }
  return m;
}

double get(const Counters& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

// requests_total of one endpoint: by status code.
std::map<int, double> by_code(const Counters& m, const std::string& endpoint) {
  std::map<int, double> out;
  const std::string head = "epyctune_serve_requests_total{";
  const std::string ep = "endpoint=\"" + endpoint + "\"";
  for (const auto& [k, v] : m) {
    if (k.rfind(head, 0) != 0 || k.find(ep) == std::string::npos) continue;
    const size_t c = k.find("code=\"");
    if (c != std::string::npos) out[std::atoi(k.c_str() + c + 6)] += v;
  }
  return out;
}

class Mix {
 public:
  Mix(Target t, MixOptions o) : t_(std::move(t)), o_(o) {}
  int run();

 private:
  void prepare();
  void client(int i, Clock::time_point end);
  void completion(Kind k, bool stream, const std::string& prompt, int cancel_after);
  void bad(const BadRequest& b);
  int settle_and_check(const Counters& before);
  void report(double wall, const Counters& before, const Counters& after);
  std::string payload(const std::string& prompt, bool stream) const;

  Target t_;
  MixOptions o_;
  int64_t n_ctx_ = 0;
  std::string prefix_;
  std::vector<BadRequest> bad_;
  std::mutex mu_;
  std::array<KindTally, kKinds> kinds_{};
  Tally all_;
  std::vector<std::string> failures_;
};

std::string Mix::payload(const std::string& prompt, bool stream) const {
  json b = {{"prompt", prompt},
            {"max_tokens", o_.max_tokens},
            {"temperature", 0},
            {"ignore_eos", true},
            {"stream", stream}};
  if (stream) b["stream_options"] = {{"include_usage", true}};
  return b.dump();
}

// The shared prefix (about a quarter of the context, measured with
// /tokenize) and the bad requests, which need the context's size.
void Mix::prepare() {
  httplib::Client c(t_.host, t_.port);
  c.set_read_timeout(120, 0);
  auto h = c.Get("/health");
  if (!h || h->status != 200) throw std::runtime_error("GET /health did not answer 200");
  n_ctx_ = json::parse(h->body).value("n_ctx", int64_t{2048});
  std::string text;
  for (int i = 0; text.size() < 4096; ++i)
    text += "You are a careful assistant; rule " + std::to_string(i) + " says be brief. ";
  auto tk = c.Post("/tokenize", json{{"content", text}}.dump(), "application/json");
  if (!tk || tk->status != 200) throw std::runtime_error("POST /tokenize did not answer 200");
  const auto n_text = static_cast<int64_t>(json::parse(tk->body)["tokens"].size());
  const double chars_per_token = double(text.size()) / double(std::max<int64_t>(1, n_text));
  const auto want = static_cast<size_t>(chars_per_token * double(n_ctx_) / 4);
  while (prefix_.size() < want) prefix_ += text;
  prefix_.resize(std::min(prefix_.size(), want));
  // Twice the context in tokens, if that stays well under the body limit.
  std::string too_long;
  const auto long_chars = static_cast<size_t>(chars_per_token * double(n_ctx_) * 2);
  if (long_chars < 512 * 1024)
    while (too_long.size() < long_chars) too_long += text;
  std::string deep(200, '[');
  deep += std::string(200, ']');
  const std::string big_header =
      "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(32 * 1024, 'a') + "\r\n\r\n";
  const std::string big_body =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(4 << 20) + "\r\n\r\n{\"prompt\": \"";
  const char* P = "POST";
  const std::string cmp = "/v1/completions";
  bad_ = {
      {"malformed JSON", P, cmp, R"({"prompt": "x", )", 400},
      {"body not an object", P, cmp, "[1, 2]", 400},
      {"nested 200 deep", P, cmp, deep, 400},
      {"prompt a number", P, cmp, R"({"prompt": 7})", 400},
      {"max_tokens a string", P, cmp, R"({"prompt": "x", "max_tokens": "ten"})", 400},
      {"model a number", P, cmp, R"({"prompt": "x", "model": 5})", 400},
      {"temperature 9", P, cmp, R"({"prompt": "x", "temperature": 9})", 400},
      {"max_tokens -5", P, cmp, R"({"prompt": "x", "max_tokens": -5})", 400},
      {"top_p 1.5", P, cmp, R"({"prompt": "x", "top_p": 1.5})", 400},
      {"n 3", P, cmp, R"({"prompt": "x", "n": 3})", 400},
      {"five stop strings", P, cmp, R"({"prompt": "x", "stop": ["a","b","c","d","e"]})", 400},
      {"unknown model", "GET", "/v1/models/no-such-model", "", 404},
      {"unknown route", P, "/v1/no-such-route", "{}", 404},
      {"wrong method", "GET", cmp, "", 405},
      {"header over 16 KiB", "RAW", "", big_header, 431, true},
      {"body over 1 MiB", "RAW", "", big_body, 413, true},
  };
  if (!too_long.empty())
    bad_.push_back({"prompt twice the context", P, cmp, json{{"prompt", too_long}}.dump(), 400});
}

void Mix::completion(Kind k, bool stream, const std::string& prompt, int cancel_after) {
  const auto t0 = Clock::now();
  int status = 0;
  bool cut = false;
  int64_t n = -1;
  double ttft = -1, tpot = -1;
  std::string body;
  if (stream) {
    const RawReply r = stream_once(t_, payload(prompt, true), cancel_after);
    status = r.status;
    cut = r.cancelled;
    body = r.body;
    if (status == 200 && !cut && r.body.find("data: [DONE]") != std::string::npos)
      n = completion_tokens_raw(r.body);
    ttft = r.ttft_s;
    if (n >= 2 && r.last_token_s > r.ttft_s) tpot = (r.last_token_s - r.ttft_s) / double(n - 1);
  } else {
    httplib::Client c(t_.host, t_.port);
    c.set_read_timeout(300, 0);
    auto r = c.Post("/v1/completions", payload(prompt, false), "application/json");
    if (r) {
      status = r->status;
      body = r->body;
      const json j = json::parse(r->body, nullptr, false);
      if (status == 200 && !j.is_discarded() && j.contains("usage"))
        n = j["usage"].value("completion_tokens", int64_t{-1});
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::lock_guard lk(mu_);
  KindTally& kt = kinds_[k];
  ++kt.sent;
  if (cut) {
    ++kt.cancelled;
    if (cancel_after == 0) ++kt.cancelled_unsent;
  } else if (status == 503) {
    ++kt.busy;
  } else if (n >= 0) {
    ++kt.ok;
    all_.ok += 1;
    all_.tokens += n;
    all_.latency_s.push_back(s);
    if (ttft >= 0) all_.ttft_s.push_back(ttft);
    if (tpot >= 0) all_.tpot_s.push_back(tpot);
  } else {
    ++kt.errors;
    if (failures_.size() < 8)
      failures_.push_back(std::string(kKindName[k]) + ": HTTP " + std::to_string(status) + ": " +
                          body.substr(0, 200));
  }
}

void Mix::bad(const BadRequest& b) {
  int status = 0;
  if (b.raw) {
    status = raw_status(t_, b.body);
  } else {
    httplib::Client c(t_.host, t_.port);
    c.set_read_timeout(60, 0);
    auto r =
        std::string(b.method) == "GET" ? c.Get(b.path) : c.Post(b.path, b.body, "application/json");
    if (r) status = r->status;
  }
  std::lock_guard lk(mu_);
  KindTally& kt = kinds_[kBad];
  ++kt.sent;
  if (status == b.expect) {
    ++kt.refused;
    return;
  }
  ++kt.errors;
  if (failures_.size() < 8)
    failures_.push_back(std::string("bad request '") + b.name + "': HTTP " +
                        std::to_string(status) + ", want " + std::to_string(b.expect));
}

// Client i's kind is i mod 5; each loops until the end, with its own seed.
void Mix::client(int i, Clock::time_point end) {
  const auto k = static_cast<Kind>(i % kKinds);
  std::mt19937 rng(static_cast<unsigned>(i) * 7919u + 1);
  for (int64_t round = 0; Clock::now() < end; ++round) {
    switch (k) {
      case kWhole:
        completion(k, false, "The quick brown fox jumps over the lazy dog", -1);
        break;
      case kStream:
        completion(k, true, "Once upon a time, in a land far away", -1);
        break;
      case kCancel: {
        // A tenth cut before any token (it may still wait in the queue), the
        // rest after 1..max/2 tokens.
        const int after = rng() % 10 == 0 ? 0 : 1 + int(rng() % unsigned(o_.max_tokens / 2 + 1));
        completion(k, true, "Tell me a long story about the sea", after);
        break;
      }
      case kPrefix:
        completion(k, round % 2 == 0, prefix_ + " Question " + std::to_string(rng() % 1000) + ":",
                   -1);
        break;
      default:
        bad(bad_[static_cast<size_t>(round) % bad_.size()]);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

// Waits (up to settle_s) for serve to count every completion we sent as
// ended, then checks: nothing queued or in flight, no 5xx but 503, and no
// more cancels counted than we made.
int Mix::settle_and_check(const Counters& before) {
  httplib::Client c(t_.host, t_.port);
  c.set_read_timeout(60, 0);
  int64_t sent = 0, unsent = 0, cuts = 0, errors = 0;
  for (int k = 0; k < kKinds; ++k) {
    errors += kinds_[k].errors;
    if (k == kBad) continue;
    sent += kinds_[k].sent;
    unsent += kinds_[k].cancelled_unsent;
    cuts += kinds_[k].cancelled;
  }
  Counters now;
  double ended = 0, in_flight = -1, depth = -1;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(o_.settle_s));
  for (;;) {
    now = scrape(c);
    auto a = by_code(now, "/v1/completions"), b = by_code(before, "/v1/completions");
    ended = a[200] - b[200] + a[503] - b[503];
    in_flight = now.empty() ? -1 : get(now, "epyctune_serve_in_flight");
    depth = now.empty() ? -1 : get(now, "epyctune_serve_queue_depth");
    if ((in_flight == 0 && depth == 0 && ended >= double(sent - unsent)) || Clock::now() > deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  auto fail = [&](const std::string& why) {
    failures_.push_back(why);
    return 1;
  };
  int rc = errors > 0 ? 1 : 0;
  if (now.empty()) return fail("GET /metrics failed after the run");
  if (in_flight != 0 || depth != 0)
    rc = fail("after " + std::to_string(int(o_.settle_s)) + " s, in_flight " +
              std::to_string(int64_t(in_flight)) + " and queue_depth " +
              std::to_string(int64_t(depth)) + ", not 0");
  if (ended < double(sent - unsent) || ended > double(sent))
    rc = fail("serve counted " + std::to_string(int64_t(ended)) +
              " completions ended (200 or 503); we sent " + std::to_string(sent) + ", " +
              std::to_string(unsent) + " of them cut at once");
  for (const auto& [k, v] : now) {
    const size_t at = k.find("code=\"5");
    if (k.rfind("epyctune_serve_requests_total{", 0) == 0 && at != std::string::npos &&
        k.find("code=\"503\"") == std::string::npos && v > get(before, k))
      rc = fail("serve answered 5xx: " + k + " " + std::to_string(int64_t(v)));
  }
  const double cancelled =
      get(now, "epyctune_serve_cancelled_total") - get(before, "epyctune_serve_cancelled_total");
  if (cancelled > double(cuts))
    rc = fail("serve counted " + std::to_string(int64_t(cancelled)) + " cancels; we made " +
              std::to_string(cuts));
  return rc;
}

void Mix::report(double wall, const Counters& before, const Counters& after) {
  auto delta = [&](const char* n) {
    const std::string k = std::string("epyctune_serve_") + n;
    return int64_t(get(after, k) - get(before, k));
  };
  const double tok_s = wall > 0 ? double(all_.tokens) / wall : 0;
  json kinds = json::object();
  for (int k = 0; k < kKinds; ++k) {
    const KindTally& t = kinds_[k];
    kinds[kKindName[k]] = {{"sent", t.sent},           {"ok", t.ok},
                           {"busy_503", t.busy},       {"cancelled", t.cancelled},
                           {"refused_4xx", t.refused}, {"errors", t.errors}};
  }
  const json server = {{"cancelled", delta("cancelled_total")},
                       {"prompt_tokens", delta("prompt_tokens_total")},
                       {"prompt_tokens_reused", delta("prompt_tokens_reused_total")},
                       {"generated_tokens", delta("generated_tokens_total")},
                       {"in_flight", int64_t(get(after, "epyctune_serve_in_flight"))}};
  if (o_.json_out) {
    std::printf("%s\n", json{{"mix", true},
                             {"clients", o_.clients},
                             {"seconds", wall},
                             {"kinds", kinds},
                             {"server", server},
                             {"completion_tokens", all_.tokens},
                             {"tok_s", tok_s},
                             {"ttft_p50_s", percentile(all_.ttft_s, 50)},
                             {"ttft_p99_s", percentile(all_.ttft_s, 99)},
                             {"tpot_p50_s", percentile(all_.tpot_s, 50)},
                             {"tpot_p99_s", percentile(all_.tpot_s, 99)},
                             {"failures", failures_}}
                            .dump()
                            .c_str());
    return;
  }
  std::printf("mix: %d clients, %.1f s, %lld tokens, %.1f tok/s\n", o_.clients, wall,
              static_cast<long long>(all_.tokens), tok_s);
  std::printf("%-8s %-8s %-8s %-8s %-10s %-8s %-8s\n", "kind", "sent", "200", "503", "cancelled",
              "4xx", "errors");
  for (int k = 0; k < kKinds; ++k) {
    const KindTally& t = kinds_[k];
    std::printf("%-8s %-8lld %-8lld %-8lld %-10lld %-8lld %-8lld\n", kKindName[k],
                static_cast<long long>(t.sent), static_cast<long long>(t.ok),
                static_cast<long long>(t.busy), static_cast<long long>(t.cancelled),
                static_cast<long long>(t.refused), static_cast<long long>(t.errors));
  }
  std::printf("server: %s\n", server.dump().c_str());
  std::printf("streamed: ttft p50 %.1f ms p99 %.1f ms, per token p50 %.1f ms p99 %.1f ms\n",
              percentile(all_.ttft_s, 50) * 1e3, percentile(all_.ttft_s, 99) * 1e3,
              percentile(all_.tpot_s, 50) * 1e3, percentile(all_.tpot_s, 99) * 1e3);
  for (const auto& f : failures_) std::fprintf(stderr, "FAIL: %s\n", f.c_str());
}

int Mix::run() {
  prepare();
  httplib::Client c(t_.host, t_.port);
  c.set_read_timeout(60, 0);
  const Counters before = scrape(c);
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(o_.seconds));
  std::vector<std::thread> threads;
  for (int i = 0; i < o_.clients; ++i) threads.emplace_back([this, i, end] { client(i, end); });
  for (auto& th : threads) th.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const int rc = settle_and_check(before);
  report(wall, before, scrape(c));
  return rc;
}

}  // namespace

int run_mix(const Target& t, const MixOptions& o) {
  Mix m(t, o);
  return m.run();
}

}  // namespace serve_load
