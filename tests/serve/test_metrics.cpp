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
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      if (family.ends_with(suffix) && family.find("duration") != std::string::npos)
        family.resize(family.size() - std::string(suffix).size());
    CHECK_MESSAGE(t.find("# TYPE " + family + " ") != std::string::npos, line);
  }
  CHECK(samples > 10);
}
