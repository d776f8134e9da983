// `epyctune-engine serve`'s HTTP front on cpp-httplib: the OpenAI-compatible
// completion endpoints, /v1/models, /health and /metrics. It listens before
// the model is loaded (/health answers 503 "loading" then) and serves
// completions once attach() hands it the engine and its scheduler.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "engine/serving/metrics.hpp"

namespace epyctune::engine::serving {

class Engine;
class Scheduler;

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: a free port
  size_t queue = 8;
  std::string model_name;     // what replies and /v1/models call the model
  std::string chat_template;  // --chat-template: a family name overriding the model's
  size_t max_body = 1 << 20;  // larger request bodies get 413
  size_t http_threads = 0;    // 0: queue + 1 + kSpareHttpThreads
  static constexpr size_t kSpareHttpThreads = 8;
};

class HttpServer {
 public:
  explicit HttpServer(ServeOptions o);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port; returns the port (the one picked for 0). Throws
  // std::runtime_error naming the address.
  int bind();
  // Accepts connections on a thread of its own.
  void start();
  // Completions are served from now on; the engine and scheduler must
  // outlive stop().
  void attach(Engine& engine, Scheduler& scheduler);
  // Stops accepting and returns when every HTTP thread has finished. Cancel
  // the scheduler's jobs first, or running completions are waited for.
  void stop();
  Metrics& metrics();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace epyctune::engine::serving
