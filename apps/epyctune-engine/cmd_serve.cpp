// `epyctune-engine serve`: the model behind an OpenAI-compatible HTTP API on
// the partition (docs/serve.md). It binds first, loads, then prints one line,
// "listening on http://HOST:PORT", for whoever started it to read; SIGTERM or
// SIGINT cancels the waiting and running completions and exits 0.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "apps/epyctune-engine/commands.hpp"
#include "apps/epyctune-engine/engine_options.hpp"
#include "apps/epyctune-engine/launch_options.hpp"
#include "apps/epyctune-engine/llama_flags.hpp"
#include "common/kv_budget.hpp"
#include "engine/model/kv_pool.hpp"
#include "engine/serving/engine.hpp"
#include "engine/serving/http_server.hpp"
#include "engine/serving/scheduler.hpp"
#include "http/message.hpp"

namespace epyctune::engine_cli {
namespace {

namespace sv = epyctune::engine::serving;
using epyctune::engine::KvPool;

struct ServeArgs {
  sv::EngineConfig engine;
  sv::ServeOptions http;
  int queue = 8;
  int parallel = 0;  // 0: from the KV budget
  std::string kv_budget;
  double prefill_gap = sv::kDefaultPrefillGap;
  std::string api_key_file;
};

// The key file's first line, without its newline: a key on the command line
// is visible to every local user in /proc.
std::string read_key_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--api-key-file: cannot read " + path);
  std::string key;
  std::getline(in, key, '\n');
  if (!key.empty() && key.back() == '\r') key.pop_back();
  if (key.empty())
    throw std::invalid_argument("--api-key-file: " + path + " holds no key on its first line");
  return key;
}

// SIGTERM and SIGINT, taken by a thread of their own with sigwait: blocked
// before any other thread starts, so every thread inherits the mask.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }
  ~StopSignals() {
    if (!waiter_.joinable()) return;
    quitting_ = true;
    pthread_kill(waiter_.native_handle(), SIGTERM);
    waiter_.join();
  }
  // on_signal runs on the signal thread, once.
  template <class F>
  void start(F on_signal) {
    waiter_ = std::thread([this, on_signal] {
      int sig = 0;
      sigwait(&set_, &sig);
      if (!quitting_) on_signal();
    });
  }

 private:
  sigset_t set_{};
  std::atomic<bool> quitting_{false};
  std::thread waiter_;
};

// Slots when neither --parallel nor --kv-budget is given: llama-server's
// default too.
constexpr int kDefaultSlots = 4;

// Without --kv-budget the pool holds --parallel contexts, or kDefaultSlots
// when neither is given; --parallel 0 takes as many sequences as it holds,
// up to 16, and by default no more than half the free memory holds when
// every one fills its context. A draft's or the lookup's proposals are
// verified inside the batched passes, where they pay: a lone request gets
// as much from them there as from generate's one-at-a-time speculation,
// and a second one is not held back. Only where speculation needs that
// path (Engine::one_at_a_time) is the default one.
int choose_parallel(const ServeArgs& a, sv::Engine& engine) {
  const KvPool& pool = engine.target().kv_pool();
  const int64_t tokens = pool.blocks_total() * KvPool::kBlockPositions;
  const int ctx = engine.n_ctx();
  int parallel = a.parallel;
  std::string why = "--parallel";
  if (const std::string alone = engine.one_at_a_time(); parallel == 0 && !alone.empty()) {
    parallel = 1;
    why = alone;
  } else if (parallel == 0) {
    const int64_t contexts = tokens / std::max(1, ctx);
    parallel = static_cast<int>(std::clamp<int64_t>(contexts, 1, 16));
    why = "the KV budget over the context, at most 16";
    if (a.kv_budget.empty()) {
      const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
      const double free_bytes = pages > 0 && page > 0 ? double(pages) * double(page) : 0;
      const double per_context = double(pool.bytes()) / double(std::max<int64_t>(1, contexts));
      const int fits = static_cast<int>(std::clamp(free_bytes / 2 / per_context, 1.0, 16.0));
      parallel = std::min(parallel, fits);
      why = std::to_string(kDefaultSlots) +
            " by default (as llama-server), no more full contexts than half the free "
            "memory holds";
    }
  }
  std::fprintf(stderr,
               "epyctune-engine serve: parallel %d (%s); KV pool %lld positions in %lld blocks "
               "(%.1f MiB, %s), context %d per sequence\n",
               parallel, why.c_str(), static_cast<long long>(tokens),
               static_cast<long long>(pool.blocks_total()), double(pool.bytes()) / 1048576.0,
               std::string(engine::traits(pool.shape().type).name).c_str(), ctx);
  return parallel;
}

int run_serve(ServeArgs a) {
  if (a.queue < 0) throw std::invalid_argument("--queue: must be >= 0");
  if (a.parallel < 0 || a.parallel > 256)
    throw std::invalid_argument(
        "--parallel: 1 to 256 requests decoding at once (0: from the KV "
        "budget)");
  if (!a.kv_budget.empty()) {
    common::KvBudget b;
    try {
      b = common::parse_kv_budget(a.kv_budget);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--kv-budget: ") + e.what());
    }
    a.engine.kv_bytes = b.bytes;
    a.engine.kv_tokens = b.tokens;
  } else {
    // A full context for each of --parallel; without it, kDefaultSlots.
    // The pool is mapped, not touched: a context no request uses costs
    // address space only.
    a.engine.kv_contexts = a.parallel > 0 ? a.parallel : kDefaultSlots;
  }
  if (a.http.port < 0 || a.http.port > 65535)
    throw std::invalid_argument("--port: must be 0 (a free port) to 65535");
  a.http.queue = static_cast<size_t>(a.queue);
  if (!a.api_key_file.empty()) {
    if (!a.http.api_key.empty())
      throw std::invalid_argument("--api-key and --api-key-file: give one of them");
    a.http.api_key = read_key_file(a.api_key_file);
  }
  try {
    epyctune::http::validate(a.http.limits);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("HTTP limits: ") + e.what());
  }
  sv::Engine engine(a.engine);  // checks options and plans CPUs before anything binds
  if (a.http.model_name.empty())
    a.http.model_name = std::filesystem::path(engine.config().model).stem().string();

  std::mutex mu;
  std::condition_variable cv;
  bool stop = false, serving = false;
  StopSignals signals;  // after what its thread touches, so it is joined first
  sv::HttpServer http(a.http);
  const int port = http.bind();
  http.start();
  signals.start([&] {
    std::unique_lock lk(mu);
    // Nothing to finish while the model loads: leave at once.
    if (!serving) std::_Exit(0);
    stop = true;
    cv.notify_all();
  });

  engine.load();
  a.parallel = choose_parallel(a, engine);
  sv::Scheduler scheduler(engine, a.http.queue, http.metrics(), a.parallel, a.prefill_gap);
  if (const std::string bad = engine.check_placement(); !bad.empty())
    throw sv::PlacementMismatch("threads or memory are not where the launch config puts them:\n" +
                                bad);
  http.attach(engine, scheduler);
  std::unique_lock lk(mu);
  serving = true;
  std::printf("listening on http://%s:%d\n", a.http.host.c_str(), port);
  std::fflush(stdout);
  cv.wait(lk, [&] { return stop; });
  lk.unlock();
  std::fprintf(stderr, "epyctune-engine serve: stopping\n");
  scheduler.stop();  // cancels the waiting and running completions
  http.stop();
  return 0;
}

void add_serve_command(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve", "Serve the model over an OpenAI-compatible HTTP API (docs/serve.md)");
  auto& e = args->engine;
  add_engine_options(cmd, e);
  add_spec_options(cmd, e);
  cmd->add_option("--host", args->http.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", args->http.port, "Port to listen on (0 = a free one)")
      ->capture_default_str();
  cmd->add_option("--queue", args->queue,
                  "Requests that may wait while --parallel run; more get 503 at once")
      ->capture_default_str();
  // llama.cpp's -np reaches here as --parallel (llama_style_args).
  cmd->add_option("--parallel", args->parallel,
                  "Requests decoded at once, batched into each forward pass (continuous "
                  "batching; a draft's or lookup's proposals are verified in the same pass where "
                  "they pay; 1 = one at a time, with adaptive speculative decoding); also -np. "
                  "Default: "
                  "as many contexts as the KV budget holds, at most 16; without --kv-budget "
                  "4, fewer when half the free memory holds fewer; 1 with a parallel (PARD) draft, "
                  "or with a draft on CPUs of its own that cannot be handed over")
      ->default_str("auto");
  cmd->add_option("--kv-budget", args->kv_budget,
                  "KV pool size, shared by every sequence: bytes (2G, 512M) or positions "
                  "(65536tok); at least one context. Default: --parallel contexts (4 without "
                  "it), mapped and touched only as used");
  cmd->add_option("--prefill-gap", args->prefill_gap,
                  "While requests decode, prompt tokens per pass are limited so that a pass "
                  "takes at most about this many times one without them (a long prompt then "
                  "slows the others' tokens by that much, and is read more slowly); 0: the "
                  "whole budget of 64 every pass")
      ->check(CLI::Validator(
          [](std::string& v) {
            double x = -1;
            try {
              x = std::stod(v);
            } catch (const std::exception&) {
            }
            return x == 0 || (x > 1 && x <= 100) ? std::string()
                                                 : std::string("0 (off) or above 1, at most 100");
          },
          "0 or >1"))
      ->capture_default_str();
  cmd->add_option("--chat-template", args->http.chat_template,
                  "Chat format when the model's template is unrecognised: chatml, llama3, "
                  "deepseek, harmony");
  cmd->add_option("-a,--alias,--model-alias", args->http.model_name,
                  "The model's name in replies and /v1/models (default: the file's stem)");
  auto& lim = args->http.limits;
  cmd->add_option("--max-body", lim.body_bytes,
                  "Largest request body in bytes, in any transfer encoding (larger: 413)")
      ->capture_default_str();
  cmd->add_option("--max-connections", lim.max_connections,
                  "HTTP connections at once; beyond, the longest-idle one is closed, else 503")
      ->capture_default_str();
  cmd->add_option("--api-key", args->http.api_key,
                  "Require 'Authorization: Bearer KEY' on every endpoint but /health and /metrics");
  cmd->add_option("--api-key-file", args->api_key_file,
                  "As --api-key, the key read from the file's first line (not visible in ps)");
  cmd->add_option("--cors", args->http.cors_origin,
                  "Let browsers from this origin ('*': any) call the API; off when not given");
  cmd->add_option_function<double>(
      "--timeout",
      [&lim](double s) {
        if (!(s > 0 && s <= 3600)) throw CLI::ValidationError("--timeout", "must be in (0, 3600]");
        lim.header_deadline = std::chrono::milliseconds(static_cast<long>(s * 1000));
      },
      "Seconds a client has to send a request's headers (default 10; the body has 30)");
  add_launch_options(cmd, e.launch);
  add_gpu_noops(cmd);
  cmd->callback([args, &global] {
    try {
      global.exit_code = run_serve(*args);
    } catch (const sv::PlacementMismatch& ex) {
      std::fprintf(stderr, "epyctune-engine serve: %s\n", ex.what());
      global.exit_code = kExitPlacement;
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "epyctune-engine serve: error: %s\n", error_text(ex).c_str());
      global.exit_code = 1;
    }
  });
}

const Registrar reg(&add_serve_command);

}  // namespace
}  // namespace epyctune::engine_cli
