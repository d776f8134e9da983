#include "engine/serving/metrics.hpp"

#include <fmt/format.h>

namespace epyctune::engine::serving {
namespace {
constexpr const char* kPrefix = "epyctune_serve_";

void head(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {}{} {}\n# TYPE {}{} {}\n", kPrefix, name, help, kPrefix, name, type);
}
void metric(std::string& out, const char* name, const char* type, const char* help, double v) {
  head(out, name, type, help);
  out += fmt::format("{}{} {}\n", kPrefix, name, v);
}
}  // namespace

void Metrics::request(const std::string& endpoint, int code, double seconds) {
  std::lock_guard lk(mu_);
  ++requests_[{endpoint, code}];
  if (seconds < 0) return;
  auto& h = latency_[endpoint];
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (seconds <= kBuckets[i]) ++h.counts[i];
  ++h.count;
  h.sum += seconds;
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

std::string Metrics::render(const QueueGauges& q, const ConnectionGauges& c) const {
  std::lock_guard lk(mu_);
  std::string out;
  head(out, "requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
  for (const auto& [key, n] : requests_)
    out += fmt::format("{}requests_total{{endpoint=\"{}\",code=\"{}\"}} {}\n", kPrefix, key.first,
                       key.second, n);
  metric(out, "rejected_total", "counter", "Requests refused with 503 because the queue was full.",
         double(rejected_));
  metric(out, "cancelled_total", "counter",
         "Completions stopped or dropped because their client disconnected.", double(cancelled_));
  metric(out, "prompt_tokens_total", "counter", "Prompt tokens processed.", double(prompt_tokens_));
  metric(out, "generated_tokens_total", "counter", "Tokens generated.", double(generated_));
  metric(out, "prompt_seconds_total", "counter", "Seconds spent processing prompts.", prompt_s_);
  metric(out, "generation_seconds_total", "counter", "Seconds spent generating tokens.",
         generate_s_);
  metric(out, "tokens_per_second", "gauge", "Generation speed of the last completion.",
         last_tok_s_);
  metric(out, "spec_drafted_total", "counter", "Speculative proposals sent to the target.",
         double(drafted_));
  metric(out, "spec_accepted_total", "counter", "Speculative proposals the target accepted.",
         double(accepted_));
  metric(out, "spec_acceptance_rate", "gauge",
         "Accepted over drafted proposals since start (0 when none were drafted).",
         drafted_ ? double(accepted_) / double(drafted_) : 0.0);
  metric(out, "queue_depth", "gauge", "Requests waiting for the generation worker.",
         double(q.depth));
  metric(out, "queue_capacity", "gauge", "Requests that may wait (--queue).", double(q.capacity));
  metric(out, "in_flight", "gauge", "Completions being generated now (0 or 1).",
         double(q.in_flight));
  metric(out, "connections", "gauge", "HTTP connections open now.", double(c.open));
  metric(out, "connections_max", "gauge", "HTTP connections allowed at once (--max-connections).",
         double(c.capacity));
  metric(out, "connections_refused_total", "counter",
         "Connections turned away (503) or idle ones closed to make room, at the cap.",
         double(c.refused));
  metric(out, "request_timeouts_total", "counter",
         "Requests whose headers or body missed their deadline (408).", double(c.timed_out));
  metric(out, "unreadable_requests_total", "counter",
         "Requests refused before routing: malformed, or over a size limit.",
         double(c.refused_requests));
  head(out, "request_duration_seconds", "histogram",
       "Completion request latency, from arrival to the last byte, by endpoint.");
  for (const auto& [ep, h] : latency_) {
    for (size_t i = 0; i < kBuckets.size(); ++i)
      out += fmt::format("{}request_duration_seconds_bucket{{endpoint=\"{}\",le=\"{}\"}} {}\n",
                         kPrefix, ep, kBuckets[i], h.counts[i]);
    out += fmt::format("{}request_duration_seconds_bucket{{endpoint=\"{}\",le=\"+Inf\"}} {}\n",
                       kPrefix, ep, h.count);
    out +=
        fmt::format("{}request_duration_seconds_sum{{endpoint=\"{}\"}} {}\n", kPrefix, ep, h.sum);
    out += fmt::format("{}request_duration_seconds_count{{endpoint=\"{}\"}} {}\n", kPrefix, ep,
                       h.count);
  }
  return out;
}

}  // namespace epyctune::engine::serving
