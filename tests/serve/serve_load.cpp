// epyctune-serve-load: C concurrent clients post completions to a serve URL
// for D seconds and report what came back: 200s, 503s (the queue was full:
// expected under overload), anything else (an error: non-zero exit), p50/p99
// latency of the 200s, p50/p99 time to first token of streamed ones, and
// aggregate tok/s from usage.completion_tokens. Beside them it can hold
// hostile connections open: idle ones (--idle) and ones that trickle a
// request's headers a byte at a time (--slow), each reopened when the
// server closes it. A test and bench tool, not part of the product.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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
  int idle = 0, slow = 0;
  int slow_interval_ms = 1000;
};

struct Tally {
  std::mutex mu;
  std::vector<double> latency_s;  // of the 200s
  std::vector<double> ttft_s;     // streamed 200s: to the first token's event
  int64_t ok = 0, busy = 0, other = 0, tokens = 0;
  int64_t reopened = 0;             // hostile connections the server closed (and we reopened)
  std::vector<std::string> errors;  // the first few
  void error(std::string e) {
    std::lock_guard lk(mu);
    ++other;
    if (errors.size() < 5) errors.push_back(std::move(e));
  }
};

int64_t completion_tokens_raw(const std::string& body);

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

int64_t completion_tokens_raw(const std::string& body) {
  const size_t at = body.rfind("\"usage\":");
  if (at == std::string::npos) return -1;
  const size_t start = body.rfind("data: ", at) + 6;
  const json j = json::parse(body.substr(start, body.find("\n\n", start) - start), nullptr, false);
  return j.is_discarded() ? -1 : j["usage"].value("completion_tokens", int64_t{-1});
}

int tcp_connect(const std::string& host, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &a.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// One streamed completion on a connection of its own, read raw so that the
// first token's arrival is timed: status, the time to the first event with
// text, and the whole reply's bytes.
struct RawReply {
  int status = 0;
  double ttft_s = -1;
  std::string body;
};
RawReply stream_once(const std::string& host, int port, const std::string& payload) {
  RawReply r;
  const int fd = tcp_connect(host, port);
  if (fd < 0) return r;
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: " + host +
                          "\r\nContent-Type: application/json\r\nConnection: close\r\n"
                          "Content-Length: " +
                          std::to_string(payload.size()) + "\r\n\r\n" + payload;
  const auto t0 = Clock::now();
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return r;
  }
  std::string in;
  char buf[16384];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
    in.append(buf, static_cast<size_t>(n));
    if (r.ttft_s < 0 && in.find("\"text\":\"") != std::string::npos &&
        in.find("\"text\":\"\"") != in.find("\"text\":\""))
      r.ttft_s = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  ::close(fd);
  if (in.rfind("HTTP/1.1 ", 0) == 0 && in.size() > 12) r.status = std::atoi(in.c_str() + 9);
  const size_t body_at = in.find("\r\n\r\n");
  if (body_at != std::string::npos) r.body = in.substr(body_at + 4);
  return r;
}

void stream_client(const Options& o, const std::string& host, int port, Clock::time_point end,
                   Tally& t, const std::string& payload) {
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    const RawReply r = stream_once(host, port, payload);
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
                          ? completion_tokens_raw(r.body)
                          : -1;
    if (n < 0) {
      t.error("HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 200));
      continue;
    }
    std::lock_guard lk(t.mu);
    ++t.ok;
    t.tokens += n;
    t.latency_s.push_back(s);
    if (r.ttft_s >= 0) t.ttft_s.push_back(r.ttft_s);
  }
  (void)o;
}

// Holds n connections that never send a byte; reopens each the server closes.
void hold_idle(const std::string& host, int port, int n, Clock::time_point end, Tally& t) {
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
      if (fd < 0) fd = tcp_connect(host, port);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
}

// Holds n connections that each send a request's headers one byte per
// interval, never finishing; reopens each the server closes (it answers 408).
void hold_slow(const std::string& host, int port, int n, int interval_ms, Clock::time_point end,
               Tally& t) {
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
        c.fd = tcp_connect(host, port);
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
  if (o.idle > 0) threads.emplace_back([&] { hold_idle(host, port, o.idle, end, t); });
  if (o.slow > 0)
    threads.emplace_back([&] { hold_slow(host, port, o.slow, o.slow_interval_ms, end, t); });
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
        stream_client(o, host, port, end, t, stream_payload);
      else
        client(o, host, port, end, t);
    });
  for (auto& th : threads) th.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const double p50 = percentile(t.latency_s, 50), p99 = percentile(t.latency_s, 99);
  const double ttft50 = percentile(t.ttft_s, 50), ttft99 = percentile(t.ttft_s, 99);
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
  app.add_flag("--json", o.json_out, "One JSON object instead of the table");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epyctune-serve-load: %s\n", e.what());
    return 2;
  }
}
