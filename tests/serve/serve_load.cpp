// epyctune-serve-load: C concurrent clients post completions to a serve URL
// for D seconds and report what came back: 200s, 503s (the queue was full:
// expected under overload), anything else (an error: non-zero exit), p50/p99
// latency of the 200s, p50/p99 time to first token of streamed ones, and
// aggregate tok/s from usage.completion_tokens, and for streamed ones the
// time per output token after the first. Beside them it can hold
// hostile connections open: idle ones (--idle) and ones that trickle a
// request's headers a byte at a time (--slow), each reopened when the
// server closes it. With --mix the clients mix kinds of requests and the
// run fails unless serve ends every one it admitted (serve_load_mix.cpp).
// A test and bench tool, not part of the product.
#include "serve_load.hpp"

#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

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

using nlohmann::json;
using serve_load::Clock;
using serve_load::completion_tokens_raw;
using serve_load::percentile;
using serve_load::Tally;
using serve_load::Target;

struct Options {
  std::string url = "http://127.0.0.1:8080";
  int clients = 8;
  double seconds = 60;
  int max_tokens = 32;
  std::string prompt = "The quick brown fox jumps over the lazy dog";
  bool stream = false;
  bool json_out = false;
  double temperature = 0;
  int idle = 0, slow = 0;
  int slow_interval_ms = 1000;
  bool mix = false;
  double settle_s = 30;
};

// Completion tokens of a reply, or -1 when it is not a well-formed one.
int64_t completion_tokens(const std::string& body, bool stream) {
  if (!stream) {
    const json j = json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.contains("usage") || !j["choices"].is_array()) return -1;
    return j["usage"].value("completion_tokens", int64_t{-1});
  }
  if (body.find("data: [DONE]\n\n") == std::string::npos) return -1;
  return completion_tokens_raw(body);
}

void stream_client(const Target& tg, Clock::time_point end, Tally& t, const std::string& payload) {
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    const serve_load::RawReply r = serve_load::stream_once(tg, payload);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r.status == 503) {
      {
        std::lock_guard lk(t.mu);
        ++t.busy;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    // The chunk framing sits between events; the events themselves are whole.
    const int64_t n = r.status == 200 && r.body.find("data: [DONE]") != std::string::npos
                          ? serve_load::completion_tokens_raw(r.body)
                          : -1;
    if (n < 0) {
      t.error("HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 200));
      continue;
    }
    const double tpot =
        n >= 2 && r.last_token_s > r.ttft_s ? (r.last_token_s - r.ttft_s) / double(n - 1) : -1;
    t.streamed(n, s, r.ttft_s, tpot);
  }
}

// Holds n connections that never send a byte; reopens each the server closes.
void hold_idle(const Target& tg, int n, Clock::time_point end, Tally& t) {
  std::vector<int> fds(static_cast<size_t>(n), -1);
  while (Clock::now() < end) {
    for (auto& fd : fds) {
      if (fd >= 0) {
        pollfd p{fd, POLLIN, 0};
        char c;
        if (::poll(&p, 1, 0) == 1 && ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0) {
          ::close(fd);
          fd = -1;
          std::lock_guard lk(t.mu);
          ++t.reopened;
        }
      }
      if (fd < 0) fd = serve_load::tcp_connect(tg);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
}

// Holds n connections that each send a request's headers one byte per
// interval, never finishing; reopens each the server closes (it answers 408).
void hold_slow(const Target& tg, int n, int interval_ms, Clock::time_point end, Tally& t) {
  const std::string head =
      "GET /health HTTP/1.1\r\nHost: x\r\nX-Trickle: " + std::string(4096, 'a');
  struct Slow {
    int fd = -1;
    size_t sent = 0;
  };
  std::vector<Slow> conns(static_cast<size_t>(n));
  while (Clock::now() < end) {
    for (auto& c : conns) {
      if (c.fd >= 0) {
        pollfd p{c.fd, POLLIN, 0};
        char buf[512];
        if (::poll(&p, 1, 0) == 1 && ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT) >= 0) {
          ::close(c.fd);  // a reply (408) or the end: the server cut it
          c.fd = -1;
          std::lock_guard lk(t.mu);
          ++t.reopened;
        }
      }
      if (c.fd < 0) {
        c.fd = serve_load::tcp_connect(tg);
        c.sent = 0;
      }
      if (c.fd >= 0 && ::send(c.fd, head.data() + c.sent % head.size(), 1, MSG_NOSIGNAL) == 1)
        ++c.sent;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
  for (auto& c : conns)
    if (c.fd >= 0) ::close(c.fd);
}

void client(const Options& o, const Target& tg, Clock::time_point end, Tally& t) {
  httplib::Client c(tg.host, tg.port);
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
  const Target tg{host, std::stoi(port_s)};
  if (o.mix)
    return serve_load::run_mix(tg, {o.clients, o.seconds, o.max_tokens, o.settle_s, o.json_out});
  Tally t;
  const auto start = Clock::now();
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> threads;
  if (o.idle > 0) threads.emplace_back([&] { hold_idle(tg, o.idle, end, t); });
  if (o.slow > 0) threads.emplace_back([&] { hold_slow(tg, o.slow, o.slow_interval_ms, end, t); });
  json body = {{"prompt", o.prompt},
               {"max_tokens", o.max_tokens},
               {"temperature", o.temperature},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  const std::string stream_payload = body.dump();
  for (int i = 0; i < o.clients; ++i)
    threads.emplace_back([&] {
      if (o.stream)
        stream_client(tg, end, t, stream_payload);
      else
        client(o, tg, end, t);
    });
  for (auto& th : threads) th.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const double p50 = percentile(t.latency_s, 50), p99 = percentile(t.latency_s, 99);
  const double ttft50 = percentile(t.ttft_s, 50), ttft99 = percentile(t.ttft_s, 99);
  const double tpot50 = percentile(t.tpot_s, 50), tpot99 = percentile(t.tpot_s, 99);
  const double tok_s = wall > 0 ? double(t.tokens) / wall : 0;
  if (o.json_out) {
    std::printf("%s\n", json{{"clients", o.clients},
                             {"seconds", wall},
                             {"ok", t.ok},
                             {"busy_503", t.busy},
                             {"errors", t.other},
                             {"p50_s", p50},
                             {"p99_s", p99},
                             {"ttft_p50_s", ttft50},
                             {"ttft_p99_s", ttft99},
                             {"tpot_p50_s", tpot50},
                             {"tpot_p99_s", tpot99},
                             {"idle", o.idle},
                             {"slow", o.slow},
                             {"reopened", t.reopened},
                             {"completion_tokens", t.tokens},
                             {"tok_s", tok_s},
                             {"error_samples", t.errors}}
                            .dump()
                            .c_str());
  } else {
    std::printf("%-8s %-8s %-8s %-8s %-8s %-10s %-10s %-10s %-10s %-10s %-10s\n", "clients",
                "seconds", "200", "503", "errors", "p50_ms", "p99_ms", "ttft50_ms", "ttft99_ms",
                "tokens", "tok/s");
    std::printf(
        "%-8d %-8.1f %-8lld %-8lld %-8lld %-10.1f %-10.1f %-10.1f %-10.1f %-10lld %-10.1f\n",
        o.clients, wall, static_cast<long long>(t.ok), static_cast<long long>(t.busy),
        static_cast<long long>(t.other), p50 * 1e3, p99 * 1e3, ttft50 * 1e3, ttft99 * 1e3,
        static_cast<long long>(t.tokens), tok_s);
    if (o.stream)
      std::printf("time per output token: p50 %.1f ms, p99 %.1f ms\n", tpot50 * 1e3, tpot99 * 1e3);
    if (o.idle + o.slow > 0)
      std::printf("hostile: %d idle, %d slow; %lld reopened after the server closed them\n", o.idle,
                  o.slow, static_cast<long long>(t.reopened));
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
  app.add_flag("--stream", o.stream, "Stream the replies (SSE), timing the first token");
  app.add_option("--idle", o.idle, "Connections held open that never send a byte")
      ->check(CLI::Range(0, 4096));
  app.add_option("--slow", o.slow, "Connections that trickle a request's headers")
      ->check(CLI::Range(0, 4096));
  app.add_option("--slow-interval-ms", o.slow_interval_ms, "Between a slow connection's bytes")
      ->check(CLI::Range(10, 60000))
      ->capture_default_str();
  app.add_flag("--mix", o.mix,
               "Mix whole, streamed and cut replies, bad requests and shared prefixes; fail "
               "unless /metrics then shows every admitted request ended");
  app.add_option("--settle", o.settle_s,
                 "With --mix: seconds serve may take after the run to end what it admitted")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--json", o.json_out, "One JSON object instead of the table");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epyctune-serve-load: %s\n", e.what());
    return 2;
  }
}
