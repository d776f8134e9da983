// `epyctune-engine serve` end to end: a child process on a free loopback
// port, driven with cpp-httplib's client.
#include <doctest/doctest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve/serve_child.hpp"
#include "serve/serve_fixture.hpp"
#include "test_util.hpp"

using namespace epyctune::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kPrompt = "the quick brown fox";

httplib::Result post(httplib::Client& c, const std::string& path, const json& body) {
  return c.Post(path.c_str(), body.dump(), "application/json");
}

// A number in /metrics (the first sample line starting with `name`), -1 when absent.
double metric(httplib::Client& c, const std::string& name) {
  auto r = c.Get("/metrics");
  REQUIRE(r);
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(name + " ") || line.starts_with(name + "{"))
      return std::stod(line.substr(line.rfind(' ') + 1));
  return -1;
}

// Polls /metrics until `name` equals want; false after ~10 s.
bool wait_metric(httplib::Client& c, const std::string& name, double want) {
  for (int i = 0; i < 500; ++i) {
    if (metric(c, name) == want) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// Polls /metrics until it holds `line`. A request is counted once its reply
// is written, which may be just after the client has read it.
bool wait_metrics_line(httplib::Client& c, const std::string& line) {
  for (int i = 0; i < 500; ++i) {
    if (c.Get("/metrics")->body.find(line) != std::string::npos) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

}  // namespace

TEST_CASE("serve answers completions as generate does, streamed and not") {
  auto& m = ServeModels::get();
  const std::string want = generate_text(m.tiny, kPrompt, 24);
  ServeChild s(engine_bin(), {"-m", m.tiny, "-t", "1", "--model-alias", "tiny-test"});
  // Checked by hand: std::regex trips GCC 12's -Wmaybe-uninitialized at -O2.
  const std::string ready = s.ready_line(), head = "listening on http://127.0.0.1:";
  REQUIRE(ready.size() > head.size() + 1);
  CHECK(ready.compare(0, head.size(), head) == 0);
  CHECK(ready.back() == '\n');
  const std::string digits = ready.substr(head.size(), ready.size() - head.size() - 1);
  CHECK(digits.find_first_not_of("0123456789") == std::string::npos);
  httplib::Client c(s.host(), s.port());

  const json req = {{"prompt", kPrompt}, {"max_tokens", 24}, {"temperature", 0}};
  auto r = post(c, "/v1/completions", req);
  REQUIRE(r);
  CHECK(r->status == 200);
  const json j = json::parse(r->body);
  CHECK(j["object"] == "text_completion");
  CHECK(j["model"] == "tiny-test");
  CHECK(j["id"].get<std::string>().starts_with("cmpl-"));
  CHECK(j["choices"][0]["text"] == want);
  CHECK(j["choices"][0]["index"] == 0);
  const std::string finish = j["choices"][0]["finish_reason"];
  CHECK((finish == "length" || finish == "stop"));
  CHECK(j["usage"]["completion_tokens"].get<int>() <= 24);
  CHECK(j["usage"]["total_tokens"] ==
        j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());

  json sreq = req;
  sreq["stream"] = true;
  sreq["stream_options"] = {{"include_usage", true}};
  auto sr = post(c, "/v1/completions", sreq);
  REQUIRE(sr);
  CHECK(sr->status == 200);
  CHECK(sr->get_header_value("Content-Type").starts_with("text/event-stream"));
  const SseText st = parse_sse(sr->body, false);
  CHECK(st.text == want);
  CHECK(st.done);
  CHECK(st.finish_reason == finish);
  CHECK(st.usage["completion_tokens"] == j["usage"]["completion_tokens"]);

  // A stop string cuts the text before it, streamed or not.
  if (want.size() > 8) {
    const std::string stop = want.substr(6, 3);
    json stopped = req;
    stopped["stop"] = stop;
    auto rs = post(c, "/v1/completions", stopped);
    REQUIRE(rs);
    const json js = json::parse(rs->body);
    CHECK(js["choices"][0]["text"] == want.substr(0, want.find(stop)));
    CHECK(js["choices"][0]["finish_reason"] == "stop");
    stopped["stream"] = true;
    CHECK(parse_sse(post(c, "/v1/completions", stopped)->body, false).text ==
          want.substr(0, want.find(stop)));
  }
  CHECK(s.stop() == 0);
}

TEST_CASE("chat completions use the fallback template") {
  auto& m = ServeModels::get();
  const json messages = json::array({{{"role", "user"}, {"content", "hello"}}});
  const std::string want = generate_text(m.tiny, "User: hello\n\nAssistant:", 12);
  ServeChild s(engine_bin(), {"-m", m.tiny, "-t", "1"});
  httplib::Client c(s.host(), s.port());
  const json req = {{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}};
  auto r = post(c, "/v1/chat/completions", req);
  REQUIRE(r);
  CHECK(r->status == 200);
  const json j = json::parse(r->body);
  CHECK(j["object"] == "chat.completion");
  CHECK(j["model"] == "tiny");  // the file's stem without --model-alias
  CHECK(j["choices"][0]["message"]["role"] == "assistant");
  CHECK(j["choices"][0]["message"]["content"] == want);
  json sreq = req;
  sreq["stream"] = true;
  const SseText st = parse_sse(post(c, "/v1/chat/completions", sreq)->body, true);
  CHECK(st.text == want);
  CHECK(st.done);
  CHECK(s.stop() == 0);
}

TEST_CASE("bad requests get OpenAI-style 400, 404 and 413; health, models and metrics") {
  auto& m = ServeModels::get();
  ServeChild s(engine_bin(), {"-m", m.tiny, "-t", "1", "-c", "64", "--max-body", "4096"});
  httplib::Client c(s.host(), s.port());
  auto expect_error = [&](const httplib::Result& r, int status, const char* param) {
    REQUIRE(r);
    CHECK(r->status == status);
    const json j = json::parse(r->body);
    CHECK(j["error"]["message"].is_string());
    CHECK(j["error"]["type"] == "invalid_request_error");
    if (param) CHECK(j["error"]["param"] == param);
  };
  expect_error(c.Post("/v1/completions", "{not json", "application/json"), 400, nullptr);
  expect_error(post(c, "/v1/completions", {{"prompt", "a"}, {"temperature", "hot"}}), 400,
               "temperature");
  expect_error(post(c, "/v1/completions", {{"prompt", "a"}, {"n", 3}}), 400, "n");
  expect_error(post(c, "/v1/chat/completions", {{"messages", 1}}), 400, "messages");
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += " word";
  auto too_long = post(c, "/v1/completions", {{"prompt", long_prompt}});
  expect_error(too_long, 400, "prompt");
  CHECK(json::parse(too_long->body)["error"]["code"] == "context_length_exceeded");
  expect_error(post(c, "/v1/completions", {{"prompt", std::string(8000, 'x')}}), 413, nullptr);
  expect_error(c.Get("/v1/nothing"), 404, nullptr);

  auto h = c.Get("/health");
  REQUIRE(h);
  CHECK(h->status == 200);
  const json hj = json::parse(h->body);
  CHECK(hj["status"] == "ok");
  CHECK(hj["n_ctx"] == 64);
  CHECK(hj["queue"]["capacity"] == 8);
  CHECK(hj["launch"].is_null());

  auto models = c.Get("/v1/models");
  REQUIRE(models);
  CHECK(json::parse(models->body)["data"][0]["id"] == "tiny");

  REQUIRE(post(c, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 5}})->status == 200);
  auto mt = c.Get("/metrics");
  REQUIRE(mt);
  CHECK(mt->get_header_value("Content-Type").starts_with("text/plain; version=0.0.4"));
  const std::string& t = mt->body;
  for (const char* name :
       {"requests_total", "rejected_total", "cancelled_total", "prompt_tokens_total",
        "generated_tokens_total", "generation_seconds_total", "tokens_per_second",
        "spec_drafted_total", "spec_accepted_total", "spec_acceptance_rate", "queue_depth",
        "in_flight", "request_duration_seconds"}) {
    CAPTURE(name);
    CHECK(t.find(std::string("# HELP epyctune_serve_") + name + " ") != std::string::npos);
  }
  CHECK(wait_metrics_line(
      c, "epyctune_serve_requests_total{endpoint=\"/v1/completions\",code=\"400\"} 4\n"));
  CHECK(wait_metrics_line(
      c, "epyctune_serve_requests_total{endpoint=\"/v1/completions\",code=\"200\"} 1\n"));
  CHECK(metric(c, "epyctune_serve_generated_tokens_total") == 5);
  CHECK(wait_metric(c, "epyctune_serve_request_duration_seconds_count", 1));
  CHECK(s.stop() == 0);
}

TEST_CASE("a draft model leaves the output the target's own") {
  auto& m = ServeModels::get();
  const std::string want = generate_text(m.tiny, kPrompt, 32);
  // One request at a time: generate's speculation, with its cost model.
  ServeChild s(engine_bin(),
               {"-m", m.tiny, "-md", m.draft, "-t", "1", "--draft-max", "3", "--parallel", "1"});
  httplib::Client c(s.host(), s.port());
  const json req = {{"prompt", kPrompt}, {"max_tokens", 32}, {"temperature", 0}};
  auto r = post(c, "/v1/completions", req);
  REQUIRE(r);
  CHECK(json::parse(r->body)["choices"][0]["text"] == want);
  json sreq = req;
  sreq["stream"] = true;
  CHECK(parse_sse(post(c, "/v1/completions", sreq)->body, false).text == want);
  CHECK(json::parse(c.Get("/health")->body)["speculative"] == true);
  CHECK(metric(c, "epyctune_serve_spec_drafted_total") > 0);
  CHECK(metric(c, "epyctune_serve_spec_acceptance_rate") > 0);
  CHECK(s.stop() == 0);
}

// One long completion runs, one waits, the next is refused; clients that
// leave free their slot, waiting or running.
TEST_CASE("a full queue answers 503 at once, and leaving clients free their slots") {
  auto& m = ServeModels::get();
  // One slot, so that B waits in the queue behind A.
  ServeChild s(engine_bin(), {"-m", m.slow, "-t", "1", "--parallel", "1", "--queue", "1"});
  httplib::Client c(s.host(), s.port());
  const json long_req = {{"prompt", kPrompt},
                         {"max_tokens", 16000},
                         {"temperature", 0},
                         {"ignore_eos", true},
                         {"stream", true}};

  std::atomic<bool> a_started{false}, a_release{false};
  std::thread a, b;
  // On the way out, even after a failed REQUIRE: A hangs up, both end.
  struct Joiner {
    std::atomic<bool>& release;
    std::thread &a, &b;
    ~Joiner() {
      release = true;
      if (a.joinable()) a.join();
      if (b.joinable()) b.join();
    }
  } joiner{a_release, a, b};
  a = std::thread([&] {
    httplib::Client ca(s.host(), s.port());
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = long_req.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      a_started = true;
      return !a_release.load();  // false: the client hangs up mid-stream
    };
    ca.send(req);
  });
  for (int i = 0; i < 1000 && !a_started; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(a_started);
  REQUIRE(wait_metric(c, "epyctune_serve_in_flight", 1));

  // B waits in the queue; its client gives up after three seconds.
  b = std::thread([&] {
    httplib::Client cb(s.host(), s.port());
    cb.set_read_timeout(3, 0);
    json body = long_req;
    body["stream"] = false;
    auto r = post(cb, "/v1/completions", body);
    CHECK(!r);  // timed out: no reply while it waited
  });
  REQUIRE(wait_metric(c, "epyctune_serve_queue_depth", 1));

  const auto t0 = std::chrono::steady_clock::now();
  auto full = post(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}});
  REQUIRE(full);
  CHECK(full->status == 503);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  CHECK(full->get_header_value("Retry-After") == "1");
  CHECK(json::parse(full->body)["error"]["code"] == "queue_full");
  CHECK(metric(c, "epyctune_serve_rejected_total") == 1);

  b.join();
  CHECK(wait_metric(c, "epyctune_serve_queue_depth", 0));  // B's slot is free again
  CHECK(metric(c, "epyctune_serve_in_flight") == 1);       // while A still runs

  a_release = true;
  a.join();
  CHECK(wait_metric(c, "epyctune_serve_in_flight", 0));  // A was cancelled, not finished
  CHECK(metric(c, "epyctune_serve_cancelled_total") == 2);
  CHECK(metric(c, "epyctune_serve_generated_tokens_total") < 16000);

  auto next = post(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}});
  REQUIRE(next);
  CHECK(next->status == 200);
  CHECK(s.stop() == 0);
}

// The daemon starts serve on a launch plan's partition: the threads land in
// the plan's groups, /health reports where, and speculation stays lossless.
TEST_CASE("serve on a launch config reports the placement in /health") {
  auto& m = ServeModels::get();
  TempDir d;
  const auto root = d.path() / "resctrl";
  std::filesystem::create_directories(root / "g-draft");
  std::filesystem::create_directories(root / "g-verify");
  const auto cfg = d.path() / "engine.toml";
  write_file(cfg,
             "[spec]\ndraft_cpus = '100'\nverify_cpus = '101-103'\ndraft_l3 = [0, 1]\n"
             "draft_resctrl_group = 'g-draft'\nverify_resctrl_group = 'g-verify'\n"
             "[models]\ntarget = '" +
                 m.tiny + "'\ndraft = '" + m.draft + "'\n");
  const std::string want = generate_text(m.tiny, kPrompt, 16);
  ServeChild s(engine_bin(), {"--launch-config", cfg.string(), "--resctrl-root", root.string(),
                              "--map-cpus", "--parallel", "1"});
  httplib::Client c(s.host(), s.port());
  const json req = {{"prompt", kPrompt}, {"max_tokens", 16}, {"temperature", 0}};
  for (int i = 0; i < 2; ++i) {  // a fresh drafting thread each time
    auto r = post(c, "/v1/completions", req);
    REQUIRE(r);
    CHECK(json::parse(r->body)["choices"][0]["text"] == want);
  }
  const json h = json::parse(c.Get("/health")->body);
  CHECK(h["spec_mode"] == "partitioned");
  const json& l = h["launch"];
  REQUIRE(l.is_object());
  CHECK(l["cpus_mapped"] == true);
  int draft = 0, verify = 0;
  for (const auto& t : l["threads"]) {
    CHECK(t["error"] == "");
    (t["resctrl_group"] == "g-draft" ? draft : verify)++;
  }
  // The drafting thread, recorded once, not once per request; and the
  // worker of the hand-back pool (both sides' CPUs) on the draft's CPU.
  CHECK(draft == 2);
  CHECK(verify >= 1);
  // Both requests' drafting threads joined the draft group, and that worker.
  const std::string tasks = read_file(root / "g-draft" / "tasks");
  CHECK(std::count(tasks.begin(), tasks.end(), '\n') == 3);
  CHECK(s.stop() == 0);

  // By default the requests are batched: both models on every CPU of the
  // plan (the hand-back pool, its worker on the draft's CPU in the draft's
  // group), the text still the target's own.
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "g-draft");
  std::filesystem::create_directories(root / "g-verify");
  ServeChild b(engine_bin(),
               {"--launch-config", cfg.string(), "--resctrl-root", root.string(), "--map-cpus"});
  httplib::Client bc(b.host(), b.port());
  auto r = post(bc, "/v1/completions", req);
  REQUIRE(r);
  CHECK(json::parse(r->body)["choices"][0]["text"] == want);
  const json bh = json::parse(bc.Get("/health")->body);
  CHECK(bh["parallel"] == 4);
  for (const auto& t : bh["launch"]["threads"]) CHECK(t["error"] == "");
  const std::string btasks = read_file(root / "g-draft" / "tasks");
  CHECK(std::count(btasks.begin(), btasks.end(), '\n') == 1);
  CHECK(b.stop() == 0);
}

TEST_CASE("--queue 0: one request at a time, none waiting") {
  auto& m = ServeModels::get();
  // A reply ends only once its slot is free again, so a client that sends
  // its next request at once never finds the server full: both the
  // one-at-a-time worker and the batched loop, whole and streamed replies.
  for (const char* parallel : {"1", "2"}) {
    CAPTURE(parallel);
    ServeChild s(engine_bin(), {"-m", m.tiny, "-t", "1", "--parallel", parallel, "--queue", "0"});
    httplib::Client c(s.host(), s.port());
    for (int i = 0; i < 24; ++i) {
      json req = {{"prompt", "a"}, {"max_tokens", 2}};
      if (i % 2) req["stream"] = true;
      auto r = post(c, "/v1/completions", req);
      REQUIRE(r);
      CHECK(r->status == 200);
    }
    CHECK(metric(c, "epyctune_serve_queue_capacity") == 0);
    CHECK(s.stop() == 0);
  }
}

TEST_CASE("--parallel 4: concurrent requests are batched and each gets its own reply") {
  auto& m = ServeModels::get();
  // Eight prompts, greedy and seeded, each as the server gives it alone.
  std::vector<json> reqs;
  for (int i = 0; i < 8; ++i) {
    json r = {{"prompt", kPrompt + std::string(size_t(i), '!')}, {"max_tokens", 12 + i}};
    if (i % 2)
      r.update({{"temperature", 0.9}, {"seed", 40 + i}, {"top_k", 30}});
    else
      r["temperature"] = 0;
    if (i == 3) r["stream"] = true;
    reqs.push_back(r);
  }
  std::vector<std::string> alone;
  {
    ServeChild one(engine_bin(), {"-m", m.tiny, "-t", "1"});
    httplib::Client c(one.host(), one.port());
    for (const auto& r : reqs) {
      auto res = post(c, "/v1/completions", r);
      REQUIRE(res);
      REQUIRE(res->status == 200);
      alone.push_back(r.contains("stream")
                          ? parse_sse(res->body, false).text
                          : json::parse(res->body)["choices"][0]["text"].get<std::string>());
    }
    CHECK(one.stop() == 0);
  }
  // Every request at once; each reply must be the one it gets alone.
  auto together = [&](ServeChild& s) {
    std::vector<std::string> got(reqs.size());
    std::vector<int> status(reqs.size(), 0);
    std::vector<std::thread> clients;
    for (size_t i = 0; i < reqs.size(); ++i)
      clients.emplace_back([&, i] {
        httplib::Client c(s.host(), s.port());
        c.set_read_timeout(60, 0);
        auto res = post(c, "/v1/completions", reqs[i]);
        if (!res) return;
        status[i] = res->status;
        got[i] = reqs[i].contains("stream")
                     ? parse_sse(res->body, false).text
                     : json::parse(res->body)["choices"][0]["text"].get<std::string>();
      });
    for (auto& t : clients) t.join();
    for (size_t i = 0; i < reqs.size(); ++i) {
      CAPTURE(i);
      CHECK(status[i] == 200);
      CHECK(got[i] == alone[i]);
    }
  };
  {
    // A draft model under load: its proposals verified in the batched
    // passes (the engine's partition of the two CPUs handed to both).
    ServeChild d(engine_bin(),
                 {"-m", m.tiny, "-md", m.draft, "-t", "2", "--parallel", "4", "--queue", "4"});
    together(d);
    httplib::Client c(d.host(), d.port());
    CHECK(metric(c, "epyctune_serve_spec_drafted_total") > 0);
    CHECK(d.stop() == 0);
  }
  ServeChild s(engine_bin(), {"-m", m.tiny, "-t", "2", "--parallel", "4", "--queue", "4"});
  together(s);
  httplib::Client c(s.host(), s.port());
  CHECK(metric(c, "epyctune_serve_in_flight") == 0);
  CHECK(metric(c, "epyctune_serve_time_to_first_token_seconds_count") == 8);
  CHECK(metric(c, "epyctune_serve_queue_wait_seconds_count") == 8);
  CHECK(metric(c, "epyctune_serve_time_per_output_token_seconds_count") == 8);
  const json slots = json::parse(c.Get("/slots")->body);
  REQUIRE(slots.size() == 4);
  for (const auto& sl : slots) {
    CHECK(sl["state"] == "idle");
    CHECK(sl["n_ctx"].get<int>() > 0);
  }
  CHECK(json::parse(c.Get("/health")->body)["parallel"] == 4);
  CHECK(s.stop() == 0);
}

TEST_CASE(
    "--kv-budget for two requests: four at once all complete; /health and /slots show it; the "
    "default slots") {
  auto& m = ServeModels::get();
  // -c 256 and max_tokens past it: each request may need 16 blocks, and
  // 512 positions hold 32.
  ServeChild s(engine_bin(),
               {"-m", m.tiny, "-t", "2", "-c", "256", "--kv-budget", "512tok", "--parallel", "4"});
  std::string shared;
  for (int i = 0; i < 4; ++i) shared += "the quick brown fox jumps ";
  std::vector<int> status(4, 0);
  std::vector<std::string> bodies(4);
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&, i] {
      httplib::Client c(s.host(), s.port());
      c.set_read_timeout(60, 0);
      auto res =
          post(c, "/v1/completions",
               {{"prompt", shared + std::to_string(i)}, {"max_tokens", 1000}, {"temperature", 0}});
      if (res) status[size_t(i)] = res->status;
      if (res && res->status != 200) bodies[size_t(i)] = res->body;
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < 4; ++i) CHECK_MESSAGE(status[size_t(i)] == 200, bodies[size_t(i)]);
  httplib::Client c(s.host(), s.port());
  const json h = json::parse(c.Get("/health")->body);
  CHECK(h["parallel"] == 4);
  CHECK(h["active_sequences"] == 0);
  CHECK(h["kv_blocks_used"] == 0);
  CHECK(h["kv_blocks_total"] == 32);
  CHECK(h["kv_block_tokens"] == 16);
  CHECK(h["kv_blocks_cached"].get<int>() > 0);  // the prompts' full blocks, kept for reuse
  CHECK(metric(c, "epyctune_serve_kv_blocks_total") == 32);
  CHECK(metric(c, "epyctune_serve_kv_block_tokens") == 16);
  CHECK(metric(c, "epyctune_serve_active_sequences") == 0);
  // The shared start was computed fewer than four times over.
  const double reused = metric(c, "epyctune_serve_prompt_tokens_reused_total");
  const double computed = metric(c, "epyctune_serve_prompt_tokens_computed_total");
  CHECK(reused >= 16);
  CHECK(reused + computed == metric(c, "epyctune_serve_prompt_tokens_total"));
  const json slots = json::parse(c.Get("/slots")->body);
  REQUIRE(slots.size() == 4);
  for (const auto& sl : slots) {
    CHECK(sl["kv_blocks"].is_array());
    CHECK(sl["kv_blocks"].empty());
    CHECK(sl["kv_blocks_reserved"] == 0);
  }
  CHECK(s.stop() == 0);

  // No --parallel: as many contexts as the budget holds.
  ServeChild d(engine_bin(), {"-m", m.tiny, "-t", "1", "-c", "64", "--kv-budget", "192tok"});
  httplib::Client dc(d.host(), d.port());
  CHECK(json::parse(dc.Get("/health")->body)["parallel"] == 3);
  CHECK(d.stop() == 0);

  // Neither: 4 slots, as llama-server; with a draft, one.
  ServeChild e(engine_bin(), {"-m", m.tiny, "-t", "1", "-c", "64"});
  httplib::Client ec(e.host(), e.port());
  const json eh = json::parse(ec.Get("/health")->body);
  CHECK(eh["parallel"] == 4);
  CHECK(eh["kv_blocks_total"] == 4 * 64 / 16);
  CHECK(json::parse(ec.Get("/slots")->body).size() == 4);
  CHECK(e.stop() == 0);
  // A draft batches by default too; one that keeps CPUs of its own (a
  // fixed draft length on a partition) runs one request at a time.
  ServeChild f(engine_bin(), {"-m", m.tiny, "-md", m.draft, "-t", "1", "-c", "64"});
  httplib::Client fc(f.host(), f.port());
  CHECK(json::parse(fc.Get("/health")->body)["parallel"] == 4);
  CHECK(f.stop() == 0);
  ServeChild g(engine_bin(), {"-m", m.tiny, "-md", m.draft, "-t", "2", "-c", "64", "--draft-max",
                              "4", "--spec-mode", "partitioned"});
  httplib::Client gc(g.host(), g.port());
  CHECK(json::parse(gc.Get("/health")->body)["parallel"] == 1);
  CHECK(g.stop() == 0);
}
