#include "engine/serving/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <vector>

#include "common/prometheus.hpp"

namespace epyctune::engine::serving {
namespace {
constexpr const char* kPrefix = "epyctune_serve_";

}  // namespace

void Metrics::Histogram::add(double seconds) {
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (seconds <= kBuckets[i]) ++counts[i];
  ++count;
  sum += seconds;
}

void Metrics::request(const std::string& endpoint, int code, double seconds) {
  std::lock_guard lk(mu_);
  ++requests_[{endpoint, code}];
  if (seconds >= 0) latency_[endpoint].add(seconds);
}

void Metrics::prompt_reused(int64_t tokens) {
  std::lock_guard lk(mu_);
  reused_ += static_cast<uint64_t>(std::max<int64_t>(0, tokens));
}

void Metrics::timings(double queue_wait, double first_token, double per_token) {
  std::lock_guard lk(mu_);
  if (queue_wait >= 0) queue_wait_.add(queue_wait);
  if (first_token >= 0) first_token_.add(first_token);
  if (per_token >= 0) per_token_.add(per_token);
}

void Metrics::rejected() {
  std::lock_guard lk(mu_);
  ++rejected_;
}

void Metrics::cancelled() {
  std::lock_guard lk(mu_);
  ++cancelled_;
}

void Metrics::generation(int64_t prompt_tokens, const speculative::SpecStats& st) {
  std::lock_guard lk(mu_);
  prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
  generated_ += static_cast<uint64_t>(st.generated);
  drafted_ += static_cast<uint64_t>(st.drafted);
  accepted_ += static_cast<uint64_t>(st.accepted);
  prompt_s_ += st.prompt_s;
  generate_s_ += st.generate_s;
  if (st.generated > 0) last_tok_s_ = st.tokens_per_second();
}

std::string Metrics::render(const QueueGauges& q, const ConnectionGauges& c,
                            const KvPoolGauges& kv) const {
  std::lock_guard lk(mu_);
  common::PromWriter w;
  auto name = [](const char* n) { return std::string(kPrefix) + n; };
  auto single = [&](const char* n, const char* type, const char* help, double v) {
    w.single(name(n), type, help, v);
  };
  w.family(name("requests_total"), "counter",
           "HTTP requests answered, by endpoint and status code.");
  for (const auto& [key, n] : requests_)
    w.sample(name("requests_total"), double(n),
             {{"endpoint", key.first}, {"code", std::to_string(key.second)}});
  single("rejected_total", "counter", "Requests refused with 503 because the queue was full.",
         double(rejected_));
  single("cancelled_total", "counter",
         "Completions stopped or dropped because their client disconnected.", double(cancelled_));
  single("prompt_tokens_total", "counter", "Prompt tokens of completions, reused or computed.",
         double(prompt_tokens_));
  single("prompt_tokens_reused_total", "counter",
         "Prompt tokens found in the KV pool (a shared prefix), not computed.", double(reused_));
  single("prompt_tokens_computed_total", "counter",
         "Prompt tokens computed: those of prompt_tokens_total not reused.",
         double(prompt_tokens_ - std::min(prompt_tokens_, reused_)));
  single("generated_tokens_total", "counter", "Tokens generated.", double(generated_));
  single("prompt_seconds_total", "counter", "Seconds spent processing prompts.", prompt_s_);
  single("generation_seconds_total", "counter", "Seconds spent generating tokens.", generate_s_);
  single("tokens_per_second", "gauge", "Generation speed of the last completion.", last_tok_s_);
  single("spec_drafted_total", "counter", "Speculative proposals sent to the target.",
         double(drafted_));
  single("spec_accepted_total", "counter", "Speculative proposals the target accepted.",
         double(accepted_));
  single("spec_acceptance_rate", "gauge",
         "Accepted over drafted proposals since start (0 when none were drafted).",
         drafted_ ? double(accepted_) / double(drafted_) : 0.0);
  single("queue_depth", "gauge", "Requests waiting for the generation worker.", double(q.depth));
  single("queue_capacity", "gauge", "Requests that may wait in the queue.", double(q.capacity));
  single("in_flight", "gauge", "Completions being generated now (at most --parallel).",
         double(q.in_flight));
  single("active_sequences", "gauge", "Sequences being decoded or prefilled now.",
         double(kv.active_sequences));
  single("kv_blocks_used", "gauge", "KV pool blocks mapped by running sequences.",
         double(kv.blocks_used));
  single("kv_blocks_cached", "gauge",
         "KV pool blocks no sequence maps, kept for prefix reuse until a request needs them.",
         double(kv.blocks_cached));
  single("kv_blocks_total", "gauge", "Blocks in the KV pool.", double(kv.blocks_total));
  single("kv_block_tokens", "gauge", "Positions per KV pool block.", double(kv.block_tokens));
  single("connections", "gauge", "HTTP connections open now.", double(c.open));
  single("connections_max", "gauge", "HTTP connections allowed at once.", double(c.capacity));
  single("connections_refused_total", "counter",
         "Connections turned away (503) or idle ones closed to make room, at the cap.",
         double(c.refused));
  single("request_timeouts_total", "counter",
         "Requests whose headers or body missed their deadline (408).", double(c.timed_out));
  single("unreadable_requests_total", "counter",
         "Requests refused before routing: malformed, or over a size limit.",
         double(c.refused_requests));
  // A histogram's samples, with one label (endpoint) or none.
  auto samples = [&](const std::string& hist, const Histogram& h, const char* label,
                     const std::string& value) {
    auto put = [&](const std::string& n, double v, const std::string& le) {
      std::vector<common::PromLabel> l;
      if (label) l.push_back({label, value});
      if (!le.empty()) l.push_back({"le", le});
      w.sample(n, v, std::span<const common::PromLabel>(l));
    };
    for (size_t i = 0; i < kBuckets.size(); ++i)
      put(hist + "_bucket", double(h.counts[i]), fmt::format("{}", kBuckets[i]));
    put(hist + "_bucket", double(h.count), "+Inf");
    put(hist + "_sum", h.sum, "");
    put(hist + "_count", double(h.count), "");
  };
  const std::string hist = name("request_duration_seconds");
  w.family(hist, "histogram",
           "Completion request latency, from arrival to the last byte, by endpoint.");
  for (const auto& [ep, h] : latency_) samples(hist, h, "endpoint", ep);
  auto single_hist = [&](const char* n, const char* help, const Histogram& h) {
    w.family(name(n), "histogram", help);
    samples(name(n), h, nullptr, "");
  };
  single_hist("queue_wait_seconds", "Time completions waited in the queue before they ran.",
              queue_wait_);
  single_hist("time_to_first_token_seconds",
              "From a completion's arrival in the queue to its first generated token.",
              first_token_);
  single_hist("time_per_output_token_seconds",
              "A completion's mean time per generated token after its first.", per_token_);
  return w.take();
}

}  // namespace epyctune::engine::serving
