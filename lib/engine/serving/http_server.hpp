// `epyctune-engine serve`'s HTTP front: the OpenAI-compatible completion
// endpoints, /v1/models, llama-server's /tokenize and /detokenize, /health
// and /metrics, routed over lib/http's bounded server. It listens before the
// model is loaded (/health answers 503 "loading" then) and serves
// completions once attach() hands it the engine and its scheduler.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "engine/serving/metrics.hpp"
#include "http/message.hpp"

namespace epyctune::engine::serving {

class Engine;
class Scheduler;

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: a free port
  size_t queue = 8;
  std::string model_name;     // what replies and /v1/models call the model
  std::string chat_template;  // --chat-template: a family name overriding the model's
  // Non-empty: every endpoint but /health and /metrics needs
  // "Authorization: Bearer <api_key>" (401 otherwise).
  std::string api_key;
  // Non-empty: browsers from this origin ("*": any) may call the API (CORS
  // headers, OPTIONS preflight). Empty: no CORS headers at all.
  std::string cors_origin;
  http::Limits limits;  // body_bytes: larger request bodies get 413
};

class HttpServer {
 public:
  explicit HttpServer(ServeOptions o);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port; returns the port (the one picked for 0). Throws
  // std::runtime_error naming the address, also when the port is in use.
  int bind();
  // Serves from now on (I/O on a thread of its own).
  void start();
  // Completions are served from now on; the engine and scheduler must
  // outlive stop().
  void attach(Engine& engine, Scheduler& scheduler);
  // Stop the scheduler first: then the replies it ended go out (up to 2 s),
  // every connection closes (cancelling what is left) and the threads join.
  void stop();
  Metrics& metrics();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace epyctune::engine::serving
