// epyctune-serve-load's pieces shared by its plain clients and its mix:
// raw loopback connections, one streamed completion read with its token
// times, the tally and the percentiles. A test and bench tool only.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace serve_load {

using Clock = std::chrono::steady_clock;

struct Target {
  std::string host;
  int port = 0;
};

struct Tally {
  std::mutex mu;
  std::vector<double> latency_s;  // of the 200s
  std::vector<double> ttft_s;     // streamed 200s: to the first token's event
  std::vector<double> tpot_s;     // streamed 200s of >= 2 tokens: per token after the first
  int64_t ok = 0, busy = 0, other = 0, tokens = 0;
  int64_t reopened = 0;             // hostile connections the server closed (and we reopened)
  std::vector<std::string> errors;  // the first few
  void error(std::string e) {
    std::lock_guard lk(mu);
    ++other;
    if (errors.size() < 5) errors.push_back(std::move(e));
  }
  // A streamed 200 with n tokens that took s seconds in all.
  void streamed(int64_t n, double s, double ttft, double tpot);
};

int tcp_connect(const Target& t);

// One streamed completion on a connection of its own, read raw so that
// token arrivals are timed. cancel_after >= 0 closes the connection once
// that many token events came (0: right after sending the request).
struct RawReply {
  int status = 0;
  double ttft_s = -1;        // to the first event with text
  double last_token_s = -1;  // to the last event with text
  bool cancelled = false;    // we closed it before the end
  std::string body;
};
RawReply stream_once(const Target& t, const std::string& payload, int cancel_after = -1);

// Any request as raw bytes on a connection of its own; the reply's status
// (0: none came). For what an HTTP client library will not send.
int raw_status(const Target& t, const std::string& request);

// Completion tokens of a streamed reply's usage event, -1 when none.
int64_t completion_tokens_raw(const std::string& body);

double percentile(std::vector<double> v, double p);

// The mix: whole and streamed replies, streams the client cuts, bad
// requests that must each get their 4xx, and requests sharing a long prompt
// prefix; then /metrics must show every admitted request ended.
struct MixOptions {
  int clients = 16;
  double seconds = 60;
  int max_tokens = 32;
  double settle_s = 30;  // how long in_flight may take to return to 0
  bool json_out = false;
};
int run_mix(const Target& t, const MixOptions& o);

}  // namespace serve_load
