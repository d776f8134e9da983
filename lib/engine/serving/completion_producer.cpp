#include "engine/serving/completion_producer.hpp"

#include "engine/serving/metrics.hpp"

namespace epyctune::engine::serving {

using nlohmann::json;

http::Reply json_reply(int status, const json& j) {
  http::Reply r;
  r.status = status;
  r.body = dump(j);
  return r;
}

http::Reply error_reply(const ApiError& e) {
  http::Reply r = json_reply(e.status, error_body(e));
  if (e.status == 503) r.headers.push_back({"Retry-After", "1"});
  return r;
}

CompletionProducer::CompletionProducer(Flight f, Scheduler& scheduler, Metrics& metrics,
                                       Clock::time_point start)
    : f_(std::move(f)), scheduler_(scheduler), metrics_(metrics), start_(start) {}

const char* CompletionProducer::endpoint_label() const {
  return f_.endpoint == Endpoint::chat ? "/v1/chat/completions" : "/v1/completions";
}

void CompletionProducer::start(std::function<void()> wake) {
  f_.job->listen(std::move(wake));
}

http::Producer::Part CompletionProducer::take() {
  std::string t;
  const bool ended = f_.job->take(t);
  if (!f_.stream) {
    text_ += t;
    return ended ? finish_whole() : Part{};
  }
  Part p;
  if (!head_sent_) {
    head_sent_ = true;
    http::Reply head;
    head.content_type = "text/event-stream";
    head.headers.push_back({"Cache-Control", "no-cache"});
    head.headers.insert(head.headers.end(), extra_.begin(), extra_.end());
    p.head = std::move(head);
    p.streamed = true;
    if (f_.endpoint == Endpoint::chat)
      p.data += sse_event(stream_chunk(f_.endpoint, f_.meta, "", "", true));
  }
  if (!t.empty()) p.data += sse_event(stream_chunk(f_.endpoint, f_.meta, t, ""));
  return ended ? finish_stream(std::move(p)) : p;
}

namespace {
// Why a job ended without finishing, as the API reports it.
ApiError failure_of(const Job& job) {
  const std::string err = job.error();
  if (err == "the server is shutting down")
    return ApiError(503, err, "", "shutting_down", "server_error");
  return ApiError(500, err.empty() ? "the completion was cancelled" : err, "", "", "server_error");
}
}  // namespace

http::Producer::Part CompletionProducer::finish_stream(Part p) {
  ended_ = true;
  p.end = true;
  const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
  if (f_.job->finish_reason().empty()) {
    // Headers went out with 200 long ago: the failure is an event, and no
    // [DONE] follows, so no client takes the cut text for a whole answer.
    p.data += sse_event(error_body(failure_of(*f_.job)));
    metrics_.request(endpoint_label(), 200, -1);
    return p;
  }
  f_.usage.completion_tokens = f_.job->completion_tokens();
  p.data += sse_event(stream_chunk(f_.endpoint, f_.meta, "", f_.job->finish_reason()));
  if (f_.include_usage) p.data += sse_event(usage_chunk(f_.endpoint, f_.meta, f_.usage));
  p.data += "data: [DONE]\n\n";
  metrics_.request(endpoint_label(), 200, secs);
  return p;
}

http::Producer::Part CompletionProducer::finish_whole() {
  ended_ = true;
  Part p;
  p.end = true;
  const char* ep = endpoint_label();
  if (f_.job->finish_reason().empty()) {
    const ApiError e = failure_of(*f_.job);
    p.head = error_reply(e);
    p.head->headers.insert(p.head->headers.end(), extra_.begin(), extra_.end());
    metrics_.request(ep, e.status, -1);
    return p;
  }
  f_.usage.completion_tokens = f_.job->completion_tokens();
  p.head = json_reply(
      200, completion_reply(f_.endpoint, f_.meta, text_, f_.job->finish_reason(), f_.usage));
  p.head->headers.insert(p.head->headers.end(), extra_.begin(), extra_.end());
  metrics_.request(ep, 200, std::chrono::duration<double>(Clock::now() - start_).count());
  return p;
}

void CompletionProducer::cancel() {
  f_.job->listen({});
  if (ended_) return;
  std::string ignore;
  if (!f_.job->take(ignore)) {
    metrics_.cancelled();  // first: whoever sees the slot free sees the count
    scheduler_.cancel(f_.job);
  }
  metrics_.request(endpoint_label(), 200, -1);
}

}  // namespace epyctune::engine::serving
