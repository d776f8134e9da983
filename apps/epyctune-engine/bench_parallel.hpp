// `bench --parallel 1,2,4,8`: P sequences decoding together, in the manner of
// llama-batched-bench. Each P prefills P distinct prompts in one pass, then
// decodes greedily with one row per sequence per pass (LlamaModel::
// forward_rows). Reported per P: prompt and aggregate decode tok/s, time per
// output token, the speed-up over P = 1, and the roofline of a P-row pass
// (P x read bandwidth / bytes the pass reads). Repeats are interleaved over
// the P values, and figures are medians.
#pragma once

#include <string>
#include <vector>

#include "apps/epyctune-engine/bench_run_options.hpp"

namespace epyctune::engine_cli {

struct ParallelBenchOptions : BenchRunOptions {
  std::vector<int> parallel;  // sequences decoding at once, per configuration
  int prompt_tokens = 32;     // per sequence
  int n_predict = 32;         // tokens generated per sequence
  std::string kv = "f16";
};

int run_parallel_bench(const ParallelBenchOptions& o);

}  // namespace epyctune::engine_cli
