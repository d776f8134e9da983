#include "engine/serving/http_server.hpp"

#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>
#include <random>

#include "engine/serving/completion_producer.hpp"
#include "engine/serving/engine.hpp"
#include "engine/serving/openai.hpp"
#include "engine/serving/scheduler.hpp"
#include "http/server.hpp"

namespace epyctune::engine::serving {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::string random_id(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lk(mu);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(prefix) + buf;
}

// The server's own refusals, in OpenAI's error shape.
http::Reply refusal(int status, const std::string& message) {
  const char* code = status == 408   ? "request_timeout"
                     : status == 413 ? "request_too_large"
                     : status == 431 ? "headers_too_large"
                     : status == 503 ? "server_busy"
                                     : "";
  return error_reply(ApiError(status, message, "", code,
                              status >= 500 ? "server_error" : "invalid_request_error"));
}

// Constant time in the key's length: a timing probe learns nothing of where
// a guess first differs.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

struct Route {
  const char* path;
  const char* method;
};
constexpr Route kRoutes[] = {
    {"/health", "GET"},    {"/metrics", "GET"},         {"/slots", "GET"},
    {"/v1/models", "GET"}, {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"},
    {"/tokenize", "POST"}, {"/detokenize", "POST"},
};

}  // namespace

struct HttpServer::Impl {
  ServeOptions o;
  Metrics metrics;
  std::atomic<Engine*> engine{nullptr};
  Scheduler* scheduler = nullptr;
  int64_t started = std::time(nullptr);
  http::Server server;

  explicit Impl(ServeOptions opts)
      : o(std::move(opts)),
        server(
            o.limits, [this](const http::Request& r) { return handle(r); }, refusal) {}

  http::Response handle(const http::Request& req);
  http::Response route(const http::Request& req, const std::string& ep);
  void add_cors(http::Reply& r) const;
  http::Reply health();
  json slots();
  KvPoolGauges pool_gauges() const;
  nlohmann::json model(const std::string& id);
  http::Response completion(Endpoint ep, const http::Request& req, Clock::time_point t0);
  std::shared_ptr<Flight> admit(Endpoint ep, const CompletionRequest& r);
  Engine& loaded();
};

void HttpServer::Impl::add_cors(http::Reply& r) const {
  if (o.cors_origin.empty()) return;
  r.headers.push_back({"Access-Control-Allow-Origin", o.cors_origin});
  if (o.cors_origin != "*") r.headers.push_back({"Vary", "Origin"});
}

// The metrics label of a path: known ones as they are, the rest "other", so
// a client cannot grow the label set.
static std::string endpoint_label(const std::string& path) {
  for (const auto& r : kRoutes)
    if (path == r.path) return path;
  if (path.starts_with("/v1/models/")) return "/v1/models/{id}";
  return "other";
}

http::Response HttpServer::Impl::handle(const http::Request& req) {
  const std::string ep = endpoint_label(req.path);
  http::Response res;
  try {
    res = route(req, ep);
  } catch (const ApiError& e) {
    res.reply = error_reply(e);
  }
  if (!res.producer) {
    add_cors(res.reply);
    metrics.request(ep, res.reply.status);
  }
  return res;
}

http::Response HttpServer::Impl::route(const http::Request& req, const std::string& ep) {
  const auto t0 = Clock::now();
  if (req.method == "OPTIONS" && !o.cors_origin.empty()) {
    http::Reply r;
    r.status = 204;
    r.content_type.clear();
    r.headers = {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                 {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
                 {"Access-Control-Max-Age", "600"}};
    return {r, nullptr};
  }
  const bool model_path = req.path.starts_with("/v1/models/") && req.path.size() > 11;
  const char* method = nullptr;
  for (const auto& r : kRoutes)
    if (req.path == r.path) method = r.method;
  if (model_path) method = "GET";
  if (!method) throw ApiError(404, "no route " + req.method + " " + req.path, "", "not_found");
  if (req.method != method) {
    http::Reply r = error_reply(ApiError(405, req.path + " takes " + method + ", not " + req.method,
                                         "", "method_not_allowed"));
    r.headers.push_back({"Allow", method});
    return {r, nullptr};
  }
  if (!o.api_key.empty() && ep != "/health" && ep != "/metrics") {
    const auto auth = req.header("authorization");
    if (!auth || !auth->starts_with("Bearer ") || !same_secret(auth->substr(7), o.api_key)) {
      http::Reply r = error_reply(ApiError(
          401,
          auth ? "the API key is not valid" : "an API key is required: Authorization: Bearer KEY",
          "", "invalid_api_key"));
      r.headers.push_back({"WWW-Authenticate", "Bearer"});
      return {r, nullptr};
    }
  }
  if (ep == "/health") return {health(), nullptr};
  if (ep == "/metrics") {
    http::Reply r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    const QueueGauges q = engine ? scheduler->gauges() : QueueGauges{0, o.queue, 0};
    const http::ServerStats s = server.stats();
    r.body = metrics.render(q,
                            {s.open, o.limits.max_connections, s.refused + s.evicted, s.timed_out,
                             s.too_large + s.malformed},
                            engine ? pool_gauges() : KvPoolGauges{});
    return {r, nullptr};
  }
  if (ep == "/slots") return {json_reply(200, slots()), nullptr};
  if (ep == "/v1/models")
    return {json_reply(200, {{"object", "list"}, {"data", json::array({model(o.model_name)})}}),
            nullptr};
  if (model_path) return {json_reply(200, model(req.path.substr(11))), nullptr};
  if (ep == "/v1/completions") return completion(Endpoint::completions, req, t0);
  if (ep == "/v1/chat/completions") return completion(Endpoint::chat, req, t0);
  Engine& e = loaded();
  if (ep == "/tokenize")
    return {json_reply(200, tokenize_reply(e.tokenizer(), parse_tokenize(req.body))), nullptr};
  // /detokenize
  const auto ids = parse_detokenize(req.body, e.tokenizer().n_vocab());
  return {json_reply(200, {{"content", e.tokenizer().decode(ids)}}), nullptr};
}

json HttpServer::Impl::model(const std::string& id) {
  if (id != o.model_name)
    throw ApiError(
        404, "no model '" + id.substr(0, 200) + "': this server serves '" + o.model_name + "'",
        "model", "model_not_found");
  return {
      {"id", o.model_name}, {"object", "model"}, {"created", started}, {"owned_by", "epyctune"}};
}

Engine& HttpServer::Impl::loaded() {
  Engine* e = engine.load();
  if (!e) throw ApiError(503, "the model is loading", "", "loading", "server_error");
  return *e;
}

http::Reply HttpServer::Impl::health() {
  Engine* e = engine.load();
  if (!e) {
    http::Reply r = json_reply(503, {{"status", "loading"}, {"model", o.model_name}});
    r.headers.push_back({"Retry-After", "1"});
    return r;
  }
  const QueueGauges q = scheduler->gauges();
  const KvPoolGauges kv = pool_gauges();
  return json_reply(
      200, {{"status", "ok"},
            {"model", o.model_name},
            {"n_ctx", e->n_ctx()},
            {"speculative", e->speculative()},
            {"spec_mode", speculative::spec_mode_name(e->mode())},
            {"draft", e->draft() != nullptr},
            {"queue", {{"depth", q.depth}, {"capacity", q.capacity}, {"in_flight", q.in_flight}}},
            {"parallel", scheduler->parallel()},
            {"active_sequences", kv.active_sequences},
            {"kv_blocks_used", kv.blocks_used},
            {"kv_blocks_cached", kv.blocks_cached},
            {"kv_blocks_total", kv.blocks_total},
            {"kv_block_tokens", kv.block_tokens},
            {"launch", e->launch() ? e->launch()->report() : json(nullptr)}});
}

KvPoolGauges HttpServer::Impl::pool_gauges() const {
  const KvGauges k = scheduler->kv();
  return {scheduler->active_sequences(), k.blocks_used, k.blocks_cached, k.blocks_total,
          k.block_tokens};
}

// llama-server's /slots, in our words: what each slot runs now and the KV
// pool blocks that hold its positions.
json HttpServer::Impl::slots() {
  Engine& e = loaded();
  json out = json::array();
  for (const auto& s : scheduler->slots())
    out.push_back({{"id", s.slot},
                   {"state", !s.busy                           ? "idle"
                             : s.prompt_done < s.prompt_tokens ? "prompt"
                                                               : "generating"},
                   {"n_ctx", e.n_ctx()},
                   {"cached_tokens", s.cached},
                   {"kv_blocks", s.blocks},
                   {"kv_blocks_reserved", s.reserved},
                   {"prompt_tokens", s.prompt_tokens},
                   {"prompt_processed", s.prompt_done},
                   {"generated", s.generated},
                   {"max_tokens", s.n_predict},
                   {"drafted", s.drafted},
                   {"accepted", s.accepted}});
  return out;
}

// Checks, tokenizes and queues one request; throws ApiError.
std::shared_ptr<Flight> HttpServer::Impl::admit(Endpoint ep, const CompletionRequest& r) {
  Engine& e = loaded();
  JobInput in;
  in.prompt = ep == Endpoint::chat ? chat_prompt_tokens(e.tokenizer(), r.messages, o.chat_template)
                                   : e.tokenizer().encode(r.prompt, true);
  const auto n_prompt = static_cast<int64_t>(in.prompt.size());
  const char* what = ep == Endpoint::chat ? "messages" : "prompt";
  if (in.prompt.empty()) throw ApiError(400, "the prompt encodes to no tokens", what);
  if (n_prompt > e.n_ctx())
    throw ApiError(400,
                   "the prompt is " + std::to_string(n_prompt) + " tokens, the context holds " +
                       std::to_string(e.n_ctx()) + " (serve -c sets it)",
                   what, "context_length_exceeded");
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

http::Response HttpServer::Impl::completion(Endpoint ep, const http::Request& req,
                                            Clock::time_point t0) {
  loaded();
  const CompletionRequest r = parse_request(ep, req.body);
  auto f = admit(ep, r);
  auto p = std::make_shared<CompletionProducer>(std::move(*f), *scheduler, metrics, t0);
  if (!o.cors_origin.empty())
    p->set_extra_headers({{"Access-Control-Allow-Origin", o.cors_origin}});
  return {{}, p};
}

HttpServer::HttpServer(ServeOptions o) : impl_(std::make_unique<Impl>(std::move(o))) {}

HttpServer::~HttpServer() {
  stop();
}

int HttpServer::bind() {
  return impl_->server.bind(impl_->o.host, impl_->o.port);
}

void HttpServer::start() {
  impl_->server.start();
}

void HttpServer::attach(Engine& engine, Scheduler& scheduler) {
  impl_->scheduler = &scheduler;
  impl_->engine.store(&engine);
}

void HttpServer::stop() {
  // Replies the stopped scheduler just ended (503s, error events) go out.
  impl_->server.stop(std::chrono::milliseconds(2000));
}

Metrics& HttpServer::metrics() {
  return impl_->metrics;
}

}  // namespace epyctune::engine::serving
