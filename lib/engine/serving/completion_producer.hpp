// A completion's reply as lib/http streams it: woken by its job as tokens
// come, it turns the job's text into SSE chunks (stream) or one JSON reply
// (whole), and a failure into an error event or a 5xx reply.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "engine/serving/openai.hpp"
#include "engine/serving/scheduler.hpp"
#include "http/server.hpp"

namespace epyctune::engine::serving {

class Metrics;

struct Flight {
  Endpoint endpoint = Endpoint::completions;
  ReplyMeta meta;
  Usage usage;
  bool stream = false, include_usage = false;
  std::shared_ptr<Job> job;
};

class CompletionProducer : public http::Producer {
 public:
  using Clock = std::chrono::steady_clock;
  CompletionProducer(Flight f, Scheduler& scheduler, Metrics& metrics, Clock::time_point start);
  void start(std::function<void()> wake) override;
  Part take() override;
  void cancel() override;
  // Headers every reply of this producer carries (CORS).
  void set_extra_headers(std::vector<http::Header> h) { extra_ = std::move(h); }

 private:
  Part finish_stream(Part p);
  Part finish_whole();
  const char* endpoint_label() const;  // the metrics label of its endpoint

  Flight f_;
  Scheduler& scheduler_;
  Metrics& metrics_;
  Clock::time_point start_;
  bool head_sent_ = false, ended_ = false;
  std::string text_;  // a whole reply's text so far
  std::vector<http::Header> extra_;
};

// The HTTP reply for an ApiError (OpenAI's error body; Retry-After on 503).
http::Reply error_reply(const ApiError& e);
http::Reply json_reply(int status, const nlohmann::json& j);

}  // namespace epyctune::engine::serving
