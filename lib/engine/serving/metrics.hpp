// `serve`'s counters and gauges, written as Prometheus text exposition
// (docs/serve.md lists every name). Thread-safe: HTTP threads count requests,
// the generation worker counts tokens.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "engine/speculative/speculative.hpp"

namespace epyctune::engine::serving {

struct QueueGauges {
  size_t depth = 0, capacity = 0;
  int in_flight = 0;
};

// The sequences running and the KV pool they use (16-position blocks).
struct KvPoolGauges {
  int active_sequences = 0;
  int64_t blocks_used = 0;    // mapped by a running sequence
  int64_t blocks_cached = 0;  // held by none, kept for prefix reuse (evictable)
  int64_t blocks_total = 0;
  int block_tokens = 0;
};

// The HTTP front's connections (lib/http's counters).
struct ConnectionGauges {
  uint64_t open = 0, capacity = 0;
  uint64_t refused = 0;           // turned away or evicted at the cap
  uint64_t timed_out = 0;         // a request that missed its deadline (408)
  uint64_t refused_requests = 0;  // unreadable or over a size limit (400, 413, 431, 501, 505)
};

class Metrics {
 public:
  // One answered request; seconds >= 0 also enters the latency histogram.
  void request(const std::string& endpoint, int code, double seconds = -1);
  void rejected();   // 503: the queue was full
  void cancelled();  // the client left before its completion ended
  void generation(int64_t prompt_tokens, const speculative::SpecStats& st);
  // One completion's times in seconds: waiting in the queue, from arrival to
  // its first token (< 0: it made none), and per output token after the
  // first (< 0: it made fewer than two).
  void timings(double queue_wait, double first_token, double per_token);
  // Prompt tokens a completion found in the KV pool (not computed).
  void prompt_reused(int64_t tokens);
  std::string render(const QueueGauges& q, const ConnectionGauges& c = {},
                     const KvPoolGauges& kv = {}) const;

  static constexpr std::array<double, 14> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                      1,     2.5,  5,     10,   30,  60,   120};

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t rejected_ = 0, cancelled_ = 0;
  uint64_t prompt_tokens_ = 0, generated_ = 0, drafted_ = 0, accepted_ = 0, reused_ = 0;
  double prompt_s_ = 0, generate_s_ = 0, last_tok_s_ = 0;
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> counts{};
    uint64_t count = 0;
    double sum = 0;
    void add(double seconds);
  };
  std::map<std::string, Histogram> latency_;
  Histogram queue_wait_, first_token_, per_token_;
};

}  // namespace epyctune::engine::serving
