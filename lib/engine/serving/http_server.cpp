#include "engine/serving/http_server.hpp"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>
#include <random>
#include <thread>

#include "engine/serving/engine.hpp"
#include "engine/serving/openai.hpp"
#include "engine/serving/scheduler.hpp"

namespace epyctune::engine::serving {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// How often a handler waiting on its job checks that its client is still there.
constexpr auto kPoll = std::chrono::milliseconds(50);

thread_local Clock::time_point t_request_start;

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  if (e.status == 503) res.set_header("Retry-After", "1");
  send_json(res, e.status, error_body(e));
}

std::string known_endpoint(const std::string& path) {
  for (const char* p :
       {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics"})
    if (path == p) return path;
  return "other";
}

std::string random_id(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lk(mu);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(prefix) + buf;
}

// A completion in flight: what its content provider needs.
struct Flight {
  Endpoint endpoint;
  ReplyMeta meta;
  Usage usage;
  bool stream = false, include_usage = false;
  std::shared_ptr<Job> job;
  bool cancelled = false;  // its client left and it was cancelled
};

}  // namespace

struct HttpServer::Impl {
  ServeOptions o;
  httplib::Server svr;
  Metrics metrics;
  std::thread listener;
  std::atomic<Engine*> engine{nullptr};
  Scheduler* scheduler = nullptr;
  int64_t started = std::time(nullptr);

  void routes();
  void completion(Endpoint ep, const httplib::Request& req, httplib::Response& res);
  std::shared_ptr<Flight> admit(Endpoint ep, const CompletionRequest& r);
  bool stream(Flight& f, httplib::DataSink& sink);
  bool whole(Flight& f, httplib::DataSink& sink);
  // Waits for the job's next text; false when the client left (the job is then cancelled).
  bool next(Flight& f, httplib::DataSink& sink, std::string& text, bool& ended);
  void health(httplib::Response& res);
};

void HttpServer::Impl::routes() {
  svr.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    t_request_start = Clock::now();
    return httplib::Server::HandlerResponse::Unhandled;
  });
  svr.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    const std::string ep = known_endpoint(req.path);
    // Latency of completed replies only: a stream whose client left is not one.
    const bool timed = res.status == 200 && ep.starts_with("/v1/") && ep != "/v1/models" &&
                       (!res.content_provider_ || res.content_provider_success_);
    metrics.request(
        ep, res.status,
        timed ? std::chrono::duration<double>(Clock::now() - t_request_start).count() : -1.0);
  });
  // httplib's own refusals (no route, body over the bound, unreadable request).
  svr.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                    httplib::Response& res) {
    if (!res.body.empty() || res.content_length_ > 0)
      return httplib::Server::HandlerResponse::Unhandled;
    std::string msg = "HTTP " + std::to_string(res.status) + " for " + req.method + " " + req.path;
    if (res.status == 404) msg = "no route " + req.method + " " + req.path;
    if (res.status == 413)
      msg = "the request body is over " + std::to_string(o.max_body) + " bytes";
    send_error(res, ApiError(res.status, msg));
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string msg = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          msg = e.what();
        } catch (...) {
        }
        send_error(res, ApiError(500, msg, "", "", "server_error"));
      });
  svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) { health(res); });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const QueueGauges q = engine ? scheduler->gauges() : QueueGauges{0, o.queue, 0};
    res.set_content(metrics.render(q), "text/plain; version=0.0.4; charset=utf-8");
  });
  svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", o.model_name},
                                      {"object", "model"},
                                      {"created", started},
                                      {"owned_by", "epyctune"}}})}});
  });
  svr.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completion(Endpoint::completions, req, res);
  });
  svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completion(Endpoint::chat, req, res);
  });
}

void HttpServer::Impl::health(httplib::Response& res) {
  Engine* e = engine.load();
  if (!e) {
    res.set_header("Retry-After", "1");
    send_json(res, 503, {{"status", "loading"}, {"model", o.model_name}});
    return;
  }
  const QueueGauges q = scheduler->gauges();
  send_json(res, 200,
            {{"status", "ok"},
             {"model", o.model_name},
             {"n_ctx", e->n_ctx()},
             {"speculative", e->speculative()},
             {"spec_mode", speculative::spec_mode_name(e->plan().mode)},
             {"draft", e->draft() != nullptr},
             {"queue", {{"depth", q.depth}, {"capacity", q.capacity}, {"in_flight", q.in_flight}}},
             {"launch", e->launch() ? e->launch()->report() : json(nullptr)}});
}

// Checks, tokenizes and queues one request; throws ApiError.
std::shared_ptr<Flight> HttpServer::Impl::admit(Endpoint ep, const CompletionRequest& r) {
  Engine& e = *engine.load();
  JobInput in;
  in.prompt = ep == Endpoint::chat ? chat_prompt_tokens(e.tokenizer(), r.messages, o.chat_template)
                                   : e.tokenizer().encode(r.prompt, true);
  const auto n_prompt = static_cast<int64_t>(in.prompt.size());
  if (in.prompt.empty())
    throw ApiError(400, "the prompt encodes to no tokens",
                   ep == Endpoint::chat ? "messages" : "prompt");
  if (n_prompt > e.n_ctx())
    throw ApiError(400,
                   "the prompt is " + std::to_string(n_prompt) + " tokens, the context holds " +
                       std::to_string(e.n_ctx()),
                   ep == Endpoint::chat ? "messages" : "prompt", "context_length_exceeded");
  // OpenAI's defaults: 16 tokens for a completion, the context's room for a chat.
  in.max_tokens =
      r.max_tokens.value_or(ep == Endpoint::chat ? e.n_ctx() - static_cast<int>(n_prompt) : 16);
  in.sampler = r.sampler;
  if (!r.seed_given) in.sampler.seed = std::random_device{}();
  in.stop = r.stop;
  in.ignore_eos = r.ignore_eos;
  auto ticket = scheduler->submit(std::move(in));
  if (ticket.admit == Scheduler::Admit::full) {
    metrics.rejected();
    throw ApiError(503,
                   "the server is busy: " + std::to_string(scheduler->capacity()) +
                       " requests are already waiting; retry later",
                   "", "queue_full", "server_error");
  }
  if (ticket.admit == Scheduler::Admit::stopping)
    throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_error");
  auto f = std::make_shared<Flight>();
  f->endpoint = ep;
  f->meta = {random_id(ep == Endpoint::chat ? "chatcmpl-" : "cmpl-"), std::time(nullptr),
             o.model_name};
  f->usage.prompt_tokens = n_prompt;
  f->stream = r.stream;
  f->include_usage = r.include_usage;
  f->job = std::move(ticket.job);
  return f;
}

void HttpServer::Impl::completion(Endpoint ep, const httplib::Request& req,
                                  httplib::Response& res) {
  try {
    if (!engine) throw ApiError(503, "the model is loading", "", "loading", "server_error");
    if (req.body.size() > o.max_body)
      throw ApiError(413, "the request body is over " + std::to_string(o.max_body) + " bytes");
    const CompletionRequest r = parse_request(ep, req.body);
    auto f = admit(ep, r);
    // The provider runs once headers are out; the releaser runs in every
    // case, so a job whose client never got that far still leaves the queue.
    auto provider = [this, f](size_t, httplib::DataSink& sink) {
      return f->stream ? stream(*f, sink) : whole(*f, sink);
    };
    auto release = [this, f](bool) {
      std::string ignore;
      if (!f->cancelled && !f->job->wait(ignore, std::chrono::milliseconds(0))) {
        metrics.cancelled();  // first: whoever sees the slot free sees the count
        scheduler->cancel(f->job);
      }
    };
    if (f->stream) res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(f->stream ? "text/event-stream" : "application/json", provider,
                                     release);
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

bool HttpServer::Impl::next(Flight& f, httplib::DataSink& sink, std::string& text, bool& ended) {
  ended = f.job->wait(text, kPoll);
  if (ended || sink.is_writable()) return true;
  f.cancelled = true;
  metrics.cancelled();  // first: whoever sees the slot free sees the count
  scheduler->cancel(f.job);
  return false;
}

bool HttpServer::Impl::stream(Flight& f, httplib::DataSink& sink) {
  auto send = [&](const json& j) {
    const std::string ev = sse_event(j);
    return sink.write(ev.data(), ev.size());
  };
  if (f.endpoint == Endpoint::chat && !send(stream_chunk(f.endpoint, f.meta, "", "", true)))
    return false;
  for (bool ended = false; !ended;) {
    std::string text;
    if (!next(f, sink, text, ended)) return false;
    if (!text.empty() && !send(stream_chunk(f.endpoint, f.meta, text, ""))) return false;
  }
  if (!f.job->error().empty() || f.job->finish_reason().empty()) {
    const std::string why = f.job->error().empty() ? "cancelled" : f.job->error();
    send({{"error",
           {{"message", why}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}});
    return false;  // cut the stream: no [DONE] for a completion that did not end
  }
  f.usage.completion_tokens = f.job->completion_tokens();
  if (!send(stream_chunk(f.endpoint, f.meta, "", f.job->finish_reason()))) return false;
  if (f.include_usage && !send(usage_chunk(f.endpoint, f.meta, f.usage))) return false;
  static const std::string kDone = "data: [DONE]\n\n";
  if (!sink.write(kDone.data(), kDone.size())) return false;
  sink.done();
  return true;
}

bool HttpServer::Impl::whole(Flight& f, httplib::DataSink& sink) {
  std::string text;
  for (bool ended = false; !ended;)
    if (!next(f, sink, text, ended)) return false;
  json body;
  if (!f.job->error().empty() || f.job->finish_reason().empty()) {
    const std::string why = f.job->error().empty() ? "cancelled" : f.job->error();
    body = error_body(ApiError(500, why, "", "", "server_error"));
  } else {
    f.usage.completion_tokens = f.job->completion_tokens();
    body = completion_reply(f.endpoint, f.meta, text, f.job->finish_reason(), f.usage);
  }
  const std::string s = dump(body);
  if (!sink.write(s.data(), s.size())) return false;
  sink.done();
  return true;
}

HttpServer::HttpServer(ServeOptions o) : impl_(std::make_unique<Impl>()) {
  impl_->o = std::move(o);
  auto& opt = impl_->o;
  // Every waiting request holds an HTTP thread (it streams from it), so the
  // pool has room for the queue, the running one, and spares that answer
  // 503, /health and /metrics while the queue is full.
  const size_t threads =
      opt.http_threads ? opt.http_threads : opt.queue + 1 + ServeOptions::kSpareHttpThreads;
  impl_->svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl_->svr.set_payload_max_length(opt.max_body);
  impl_->svr.set_keep_alive_timeout(2);  // idle keep-alive threads end soon on stop
  // A reply goes out in several small writes (headers, chunks, the last
  // chunk): without TCP_NODELAY, Nagle holds each behind the client's
  // delayed ACK.
  impl_->svr.set_tcp_nodelay(true);
  impl_->routes();
}

HttpServer::~HttpServer() {
  stop();
}

int HttpServer::bind() {
  auto& o = impl_->o;
  int port = o.port;
  if (o.port == 0) {
    port = impl_->svr.bind_to_any_port(o.host);
    if (port < 0) throw std::runtime_error("cannot bind " + o.host + " to a free port");
  } else if (!impl_->svr.bind_to_port(o.host, o.port)) {
    throw std::runtime_error("cannot bind " + o.host + ":" + std::to_string(o.port) +
                             " (in use, or not an address of this host)");
  }
  return port;
}

void HttpServer::start() {
  impl_->listener = std::thread([this] { impl_->svr.listen_after_bind(); });
  // stop() only stops a server that runs: wait until it does.
  for (int i = 0; i < 1000 && !impl_->svr.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::attach(Engine& engine, Scheduler& scheduler) {
  impl_->scheduler = &scheduler;
  impl_->engine.store(&engine);
}

void HttpServer::stop() {
  impl_->svr.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

Metrics& HttpServer::metrics() {
  return impl_->metrics;
}

}  // namespace epyctune::engine::serving
