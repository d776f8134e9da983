// epyctune-serve-load: C concurrent clients post completions to a serve URL
// for D seconds and report what came back: 200s, 503s (the queue was full:
// expected under overload), anything else (an error: non-zero exit), p50/p99
// latency of the 200s and aggregate tok/s from usage.completion_tokens.
// A test and bench tool, not part of the product: it lives with the tests.
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Options {
  std::string url = "http://127.0.0.1:8080";
  int clients = 8;
  double seconds = 60;
  int max_tokens = 32;
  std::string prompt = "The quick brown fox jumps over the lazy dog";
  bool stream = false;
  bool json_out = false;
  double temperature = 0;
};

struct Tally {
  std::mutex mu;
  std::vector<double> latency_s;  // of the 200s
  int64_t ok = 0, busy = 0, other = 0, tokens = 0;
  std::vector<std::string> errors;  // the first few
  void error(std::string e) {
    std::lock_guard lk(mu);
    ++other;
    if (errors.size() < 5) errors.push_back(std::move(e));
  }
};

// Completion tokens of a reply, or -1 when it is not a well-formed one.
int64_t completion_tokens(const std::string& body, bool stream) {
  if (!stream) {
    const json j = json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.contains("usage") || !j["choices"].is_array()) return -1;
    return j["usage"].value("completion_tokens", int64_t{-1});
  }
  if (body.find("data: [DONE]\n\n") == std::string::npos) return -1;
  const size_t at = body.rfind("\"usage\":");
  if (at == std::string::npos) return -1;
  const size_t start = body.rfind("data: ", at) + 6;
  const json j = json::parse(body.substr(start, body.find("\n\n", start) - start), nullptr, false);
  return j.is_discarded() ? -1 : j["usage"].value("completion_tokens", int64_t{-1});
}

void client(const Options& o, const std::string& host, int port, Clock::time_point end, Tally& t) {
  httplib::Client c(host, port);
  c.set_read_timeout(300, 0);
  c.set_tcp_nodelay(true);
  c.set_keep_alive(true);  // one connection per client, as a real client keeps
  json body = {{"prompt", o.prompt},
               {"max_tokens", o.max_tokens},
               {"temperature", o.temperature},
               {"ignore_eos", true},
               {"stream", o.stream}};
  if (o.stream) body["stream_options"] = {{"include_usage", true}};
  const std::string payload = body.dump();
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    auto r = c.Post("/v1/completions", payload, "application/json");
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!r) {
      t.error("no reply: " + httplib::to_string(r.error()));
      continue;
    }
    if (r->status == 503) {
      {
        std::lock_guard lk(t.mu);
        ++t.busy;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // short of Retry-After
      continue;
    }
    const int64_t n = r->status == 200 ? completion_tokens(r->body, o.stream) : -1;
    if (n < 0) {
      t.error("HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 200));
      continue;
    }
    std::lock_guard lk(t.mu);
    ++t.ok;
    t.tokens += n;
    t.latency_s.push_back(s);
  }
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * double(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

int run(const Options& o) {
  // http://HOST:PORT[/], parsed by hand (std::regex trips GCC 12's
  // -Wmaybe-uninitialized at -O2).
  const std::string scheme = "http://";
  std::string rest = o.url.rfind(scheme, 0) == 0 ? o.url.substr(scheme.size()) : "";
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  const auto colon = rest.rfind(':');
  const std::string host = colon == std::string::npos ? "" : rest.substr(0, colon);
  const std::string port_s = colon == std::string::npos ? "" : rest.substr(colon + 1);
  if (host.empty() || host.find_first_of("/:") != std::string::npos || port_s.empty() ||
      port_s.size() > 5 || port_s.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument("--url: want http://HOST:PORT, got " + o.url);
  const int port = std::stoi(port_s);
  Tally t;
  const auto start = Clock::now();
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> threads;
  for (int i = 0; i < o.clients; ++i) threads.emplace_back([&] { client(o, host, port, end, t); });
  for (auto& th : threads) th.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const double p50 = percentile(t.latency_s, 50), p99 = percentile(t.latency_s, 99);
  const double tok_s = wall > 0 ? double(t.tokens) / wall : 0;
  if (o.json_out) {
    std::printf("%s\n", json{{"clients", o.clients},
                             {"seconds", wall},
                             {"ok", t.ok},
                             {"busy_503", t.busy},
                             {"errors", t.other},
                             {"p50_s", p50},
                             {"p99_s", p99},
                             {"completion_tokens", t.tokens},
                             {"tok_s", tok_s},
                             {"error_samples", t.errors}}
                            .dump()
                            .c_str());
  } else {
    std::printf("%-8s %-8s %-8s %-8s %-8s %-10s %-10s %-10s %-10s\n", "clients", "seconds", "200",
                "503", "errors", "p50_ms", "p99_ms", "tokens", "tok/s");
    std::printf("%-8d %-8.1f %-8lld %-8lld %-8lld %-10.1f %-10.1f %-10lld %-10.1f\n", o.clients,
                wall, static_cast<long long>(t.ok), static_cast<long long>(t.busy),
                static_cast<long long>(t.other), p50 * 1e3, p99 * 1e3,
                static_cast<long long>(t.tokens), tok_s);
    for (const auto& e : t.errors) std::fprintf(stderr, "error: %s\n", e.c_str());
  }
  if (t.other > 0) return 1;
  if (t.ok == 0) {
    std::fprintf(stderr, "epyctune-serve-load: no request succeeded\n");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Load test for epyctune-engine serve: concurrent completion clients"};
  Options o;
  app.add_option("--url", o.url, "The server")->capture_default_str();
  app.add_option("-c,--clients", o.clients, "Concurrent clients")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("-d,--seconds", o.seconds, "How long to send requests")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("-n,--max-tokens", o.max_tokens, "max_tokens per request (ignore_eos is set)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("-p,--prompt", o.prompt, "Prompt")->capture_default_str();
  app.add_option("--temperature", o.temperature, "Sampling temperature")->capture_default_str();
  app.add_flag("--stream", o.stream, "Stream the replies (SSE)");
  app.add_flag("--json", o.json_out, "One JSON object instead of the table");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epyctune-serve-load: %s\n", e.what());
    return 2;
  }
}
