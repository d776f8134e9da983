// `engine status`'s load column source: each running instance's /health,
// here from an HTTP server standing in for a serve child, in the shape serve
// gives with the paged KV pool and in today's shape without it.
#include <doctest/doctest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "daemon/health.hpp"

using namespace epyctune::daemon;
using nlohmann::json;

namespace {

// A /health on loopback: with the KV pool's fields or without them.
struct FakeServe {
  httplib::Server server;
  std::atomic<bool> pooled{true};
  int port = 0;
  std::thread thread;

  FakeServe() {
    server.Get("/health", [this](const httplib::Request&, httplib::Response& r) {
      json j = {{"status", "ok"},
                {"parallel", 8},
                {"queue", {{"depth", 2}, {"capacity", 16}, {"in_flight", 5}}}};
      if (pooled)
        j.update({{"active_sequences", 5},
                  {"kv_blocks_used", 120},
                  {"kv_blocks_total", 512},
                  {"kv_block_tokens", 16}});
      r.set_content(j.dump(), "application/json");
    });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
    while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FakeServe() {
    server.stop();
    thread.join();
  }
};

json instances(int port) {
  return {{"instances",
           json::array({{{"name", "a"},
                         {"state", "running"},
                         {"url", "http://127.0.0.1:" + std::to_string(port)}},
                        {{"name", "b"}, {"state", "stopped"}, {"url", ""}},
                        // Running, but nothing answers there (port 1 is not ours).
                        {{"name", "c"}, {"state", "running"}, {"url", "http://127.0.0.1:1"}}})}};
}

}  // namespace

TEST_CASE("engine status: a running instance's sequences and KV use from its /health") {
  FakeServe serve;
  REQUIRE(serve.port > 0);
  json st = instances(serve.port);
  add_serving_load(st, 2000);
  const json& a = st["instances"][0]["serving"];
  CHECK(a["active_sequences"] == 5);
  CHECK(a["kv_blocks_used"] == 120);
  CHECK(a["kv_blocks_total"] == 512);
  CHECK(a["kv_block_tokens"] == 16);
  CHECK(a["kv_used_pct"].get<double>() == doctest::Approx(23.4375));
  CHECK(a["parallel"] == 8);
  CHECK(a["in_flight"] == 5);
  CHECK(a["queue_depth"] == 2);
  CHECK_FALSE(st["instances"][1].contains("serving"));  // stopped: not asked
  CHECK(st["instances"][2]["serving"].is_null());       // no /health answered

  // An engine from before the paged KV pool: those fields are null, not 0.
  serve.pooled = false;
  st = instances(serve.port);
  add_serving_load(st, 2000);
  const json& old = st["instances"][0]["serving"];
  CHECK(old["active_sequences"].is_null());
  CHECK(old["kv_blocks_used"].is_null());
  CHECK(old["kv_used_pct"].is_null());
  CHECK(old["in_flight"] == 5);
}

TEST_CASE("serving_load: wrong types and a zero-block pool give no share") {
  const json h = {{"active_sequences", "many"}, {"kv_blocks_used", 0}, {"kv_blocks_total", 0}};
  const json s = serving_load(h);
  CHECK(s["active_sequences"].is_null());
  CHECK(s["kv_blocks_used"] == 0);
  CHECK(s["kv_used_pct"].is_null());
  CHECK(serving_load(json::array())["parallel"].is_null());
}
