// `bench --draft D --spec adaptive,2,4,8`: plain and speculative decoding of
// the same prompt side by side in one run (interleaved repeats, medians),
// with acceptance by position, the K chosen over time, and the cost model's
// predicted speed-up next to the measured one.
#pragma once

#include <string>
#include <vector>

#include "apps/epyctune-engine/bench_run_options.hpp"
#include "engine/speculative/partition.hpp"

namespace epyctune::engine_cli {

struct SpecBenchOptions : BenchRunOptions {
  std::string draft;
  int draft_threads = 0;          // -td: the draft's partition is the last N CPUs
  std::vector<std::string> spec;  // "adaptive" or a fixed K, per configuration
  std::string prompt;
  int n_predict = 128;
  engine::speculative::ModeRequest spec_mode = engine::speculative::ModeRequest::automatic;
  int lookup = 0;
  bool cost_cache = true;
};

int run_spec_bench(const SpecBenchOptions& o);

}  // namespace epyctune::engine_cli
