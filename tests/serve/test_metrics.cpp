// The Prometheus exposition of serve's metrics.
#include <doctest/doctest.h>

#include "engine/serving/metrics.hpp"

using namespace epyctune::engine::serving;

TEST_CASE("metrics render as Prometheus text with HELP and TYPE") {
  Metrics m;
  m.request("/v1/completions", 200, 0.2);
  m.request("/v1/completions", 503);
  m.rejected();
  epyctune::engine::speculative::SpecStats st;
  st.generated = 10;
  st.generate_s = 0.5;
  st.drafted = 8;
  st.accepted = 6;
  m.generation(4, st);
  const std::string t = m.render({2, 8, 1});
  CHECK(t.find("# TYPE epyctune_serve_requests_total counter") != std::string::npos);
  CHECK(t.find("epyctune_serve_requests_total{endpoint=\"/v1/completions\",code=\"503\"} 1") !=
        std::string::npos);
  CHECK(t.find("epyctune_serve_rejected_total 1") != std::string::npos);
  CHECK(t.find("epyctune_serve_generated_tokens_total 10") != std::string::npos);
  CHECK(t.find("epyctune_serve_prompt_tokens_total 4") != std::string::npos);
  CHECK(t.find("epyctune_serve_tokens_per_second 20") != std::string::npos);
  CHECK(t.find("epyctune_serve_spec_acceptance_rate 0.75") != std::string::npos);
  CHECK(t.find("epyctune_serve_queue_depth 2") != std::string::npos);
  CHECK(t.find("epyctune_serve_in_flight 1") != std::string::npos);
  CHECK(t.find("epyctune_serve_request_duration_seconds_bucket{endpoint=\"/v1/completions\","
               "le=\"0.25\"} 1") != std::string::npos);
  CHECK(t.find("epyctune_serve_request_duration_seconds_bucket{endpoint=\"/v1/completions\","
               "le=\"0.1\"} 0") != std::string::npos);
  CHECK(t.find("epyctune_serve_request_duration_seconds_count{endpoint=\"/v1/completions\"} 1") !=
        std::string::npos);
  // Every sample line belongs to a family declared with HELP and TYPE.
  size_t samples = 0;
  for (size_t pos = 0; pos < t.size();) {
    const size_t end = t.find('\n', pos);
    const std::string line = t.substr(pos, end - pos);
    pos = end + 1;
    if (line.starts_with("#")) continue;
    ++samples;
    std::string family = line.substr(0, line.find_first_of("{ "));
    for (const std::string suffix : {"_bucket", "_sum", "_count"})
      if (family.ends_with(suffix) &&
          t.find("# TYPE " + family.substr(0, family.size() - suffix.size()) + " histogram") !=
              std::string::npos)
        family.resize(family.size() - suffix.size());
    CHECK_MESSAGE(t.find("# TYPE " + family + " ") != std::string::npos, line);
  }
  CHECK(samples > 10);
}

TEST_CASE("metrics carry the KV pool's gauges and prompt tokens reused against computed") {
  Metrics m;
  epyctune::engine::speculative::SpecStats st;
  m.generation(40, st);
  m.prompt_reused(32);
  m.generation(10, st);
  KvPoolGauges kv;
  kv.active_sequences = 3;
  kv.blocks_used = 17;
  kv.blocks_cached = 5;
  kv.blocks_total = 64;
  kv.block_tokens = 16;
  const std::string t = m.render({}, {}, kv);
  for (const char* line :
       {"epyctune_serve_active_sequences 3", "epyctune_serve_kv_blocks_used 17",
        "epyctune_serve_kv_blocks_cached 5", "epyctune_serve_kv_blocks_total 64",
        "epyctune_serve_kv_block_tokens 16", "epyctune_serve_prompt_tokens_reused_total 32",
        "epyctune_serve_prompt_tokens_computed_total 18",
        "# TYPE epyctune_serve_kv_blocks_used gauge",
        "# TYPE epyctune_serve_prompt_tokens_computed_total counter"})
    CHECK_MESSAGE(t.find(std::string(line) + "\n") != std::string::npos, line);
}

TEST_CASE("queue wait, time to first token and time per output token are histograms") {
  Metrics m;
  m.timings(0.002, 0.03, 0.02);
  m.timings(1.5, -1, -1);   // cancelled before its first token
  m.timings(0.0, 0.2, -1);  // one token only
  const std::string t = m.render({});
  auto has = [&](const std::string& s) { return t.find(s) != std::string::npos; };
  CHECK(has("# TYPE epyctune_serve_queue_wait_seconds histogram"));
  CHECK(has("epyctune_serve_queue_wait_seconds_bucket{le=\"0.005\"} 2\n"));
  CHECK(has("epyctune_serve_queue_wait_seconds_bucket{le=\"+Inf\"} 3\n"));
  CHECK(has("epyctune_serve_queue_wait_seconds_count 3\n"));
  CHECK(has("# TYPE epyctune_serve_time_to_first_token_seconds histogram"));
  CHECK(has("epyctune_serve_time_to_first_token_seconds_bucket{le=\"0.05\"} 1\n"));
  CHECK(has("epyctune_serve_time_to_first_token_seconds_count 2\n"));
  CHECK(has("epyctune_serve_time_per_output_token_seconds_bucket{le=\"0.025\"} 1\n"));
  CHECK(has("epyctune_serve_time_per_output_token_seconds_count 1\n"));
  CHECK(has("epyctune_serve_time_per_output_token_seconds_sum 0.02\n"));
}
