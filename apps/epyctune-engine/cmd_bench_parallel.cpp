// bench --parallel: see bench_parallel.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <span>

#include "apps/epyctune-engine/bench_parallel.hpp"
#include "apps/epyctune-engine/engine_options.hpp"
#include "common/cpulist.hpp"
#include "common/elapsed.hpp"
#include "common/stats.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/model/llama_model.hpp"
#include "engine/runtime/bandwidth.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/runtime/thread_pool.hpp"

namespace epyctune::engine_cli {
namespace {

using Clock = std::chrono::steady_clock;
using common::median;

struct Run {
  double prompt_s = 0;         // the P prompts in one pass
  std::vector<double> pass_s;  // each decode pass
  // Sequence 0's greedy tokens: a check that P does not change them.
  std::vector<int32_t> first_seq;
};

// One configuration: P sequences prefilled together, then n_predict greedy
// passes of one row each.
Run run_once(engine::LlamaModel& m, int P, const ParallelBenchOptions& o) {
  const int V = m.n_vocab();
  std::vector<std::unique_ptr<engine::Sequence>> seqs;
  std::vector<engine::SeqRow> rows;
  for (int s = 0; s < P; ++s) {
    seqs.push_back(m.new_sequence());
    // Every sequence's prompt differs, but sequence 0's is the same for each P.
    for (int i = 0; i < o.prompt_tokens; ++i)
      rows.push_back({seqs.back().get(), static_cast<int32_t>((i * 7919 + s * 104729 + 13) % V)});
  }
  std::vector<float> logits(rows.size() * size_t(V));
  Run r;
  auto t0 = Clock::now();
  m.forward_rows(rows, logits.data());
  r.prompt_s = common::seconds_since(t0);
  // Each sequence's next token: the argmax after its last prompt row.
  std::vector<int32_t> next(static_cast<size_t>(P));
  auto argmax = [&](size_t row) {
    const float* x = logits.data() + row * size_t(V);
    return static_cast<int32_t>(std::max_element(x, x + V) - x);
  };
  for (int s = 0; s < P; ++s) next[size_t(s)] = argmax(size_t(s + 1) * o.prompt_tokens - 1);
  rows.resize(size_t(P));
  for (int step = 0; step < o.n_predict; ++step) {
    r.first_seq.push_back(next[0]);
    for (int s = 0; s < P; ++s) rows[size_t(s)] = {seqs[size_t(s)].get(), next[size_t(s)]};
    auto t1 = Clock::now();
    m.forward_rows(rows, logits.data());
    r.pass_s.push_back(common::seconds_since(t1));
    for (int s = 0; s < P; ++s) next[size_t(s)] = argmax(size_t(s));
  }
  return r;
}

struct Row {
  int P = 0;
  double prompt_tps = 0, decode_tps = 0, tpot_ms = 0, speedup = 0, roofline_tps = 0;
  uint64_t bytes_per_pass = 0;
  bool same_tokens = true;  // sequence 0's output equals its P = 1 output
};

}  // namespace

int run_parallel_bench(const ParallelBenchOptions& o) {
  using namespace engine;
  try {
    const int max_p = *std::max_element(o.parallel.begin(), o.parallel.end());
    std::vector<int> cpus = o.cpus.empty() ? runtime::first_cpus(o.threads) : cpus_flag(o.cpus);
    runtime::ThreadPool pool(cpus, true);
    ModelOptions mo;
    mo.prefault = true;
    mo.kv_type = o.kv == "f32" ? GgmlType::F32 : GgmlType::F16;
    mo.max_batch = std::max(64, max_p);
    auto model = LlamaModel::load(o.model, pool, mo);
    if (o.prompt_tokens + o.n_predict > model->n_ctx())
      throw std::invalid_argument(fmt::format("--ctx {} + -n {} exceeds the model's n_ctx {}",
                                              o.prompt_tokens, o.n_predict, model->n_ctx()));
    const auto bw = runtime::measure_read_bandwidth(pool, size_t(o.bw_mib) << 20, 7);
    run_once(*model, 1, o);  // warm-up: first touches of the KV pages and scratch

    std::map<int, std::vector<Run>> runs;
    for (int rep = 0; rep < o.repeat; ++rep)
      for (int P : o.parallel) {
        if (!o.json)
          std::cerr << fmt::format("\r[parallel] repeat {}/{}: P = {}   ", rep + 1, o.repeat, P);
        runs[P].push_back(run_once(*model, P, o));
      }
    if (!o.json) std::cerr << '\n';

    std::vector<Row> rows;
    const std::vector<int32_t>* one = runs.count(1) ? &runs[1].front().first_seq : nullptr;
    for (int P : o.parallel) {
      Row row;
      row.P = P;
      std::vector<double> prompt, decode, tpot;
      for (const auto& r : runs[P]) {
        prompt.push_back(double(P) * o.prompt_tokens / r.prompt_s);
        decode.push_back(double(P) * o.n_predict /
                         std::accumulate(r.pass_s.begin(), r.pass_s.end(), 0.0));
        tpot.push_back(1e3 * median(r.pass_s));
        if (one && r.first_seq != *one) row.same_tokens = false;
      }
      row.prompt_tps = median(prompt);
      row.decode_tps = median(decode);
      row.tpot_ms = median(tpot);
      row.bytes_per_pass = model->weight_bytes_per_pass(P);
      row.roofline_tps = double(P) * bw.median_gbps * 1e9 / double(row.bytes_per_pass);
      rows.push_back(row);
    }
    const auto base = std::find_if(rows.begin(), rows.end(), [](const Row& r) { return r.P == 1; });
    for (auto& r : rows)
      if (base != rows.end()) r.speedup = r.decode_tps / base->decode_tps;
    const bool all_same =
        std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.same_tokens; });

    if (o.json) {
      nlohmann::json j;
      j["model"] = o.model;
      j["threads"] = pool.size();
      j["cpus"] = common::format_cpulist(pool.cpus());
      j["isa"] = kernels::isa_name(kernels::active_isa());
      j["prompt_tokens"] = o.prompt_tokens;
      j["n_predict"] = o.n_predict;
      j["repeats"] = o.repeat;
      j["bandwidth_gbps"] = bw.median_gbps;
      j["batch_invariant"] = all_same;
      for (const auto& r : rows)
        j["rows"].push_back({{"parallel", r.P},
                             {"prompt_tok_s", r.prompt_tps},
                             {"decode_tok_s", r.decode_tps},
                             {"time_per_output_token_ms", r.tpot_ms},
                             {"speedup_vs_1", r.speedup},
                             {"bytes_per_pass", r.bytes_per_pass},
                             {"roofline_tok_s", r.roofline_tps},
                             {"same_tokens_as_alone", r.same_tokens}});
      std::cout << j.dump(2) << '\n';
    } else {
      fmt::print("model      {} ({}), {} threads on CPUs {}, ISA {}\n", o.model,
                 traits(model->weight_type()).name, pool.size(),
                 common::format_cpulist(pool.cpus()), kernels::isa_name(kernels::active_isa()));
      fmt::print(
          "bandwidth  {:.2f} GB/s read; prompt {} tokens and {} generated per sequence; "
          "medians of {} interleaved repeats\n",
          bw.median_gbps, o.prompt_tokens, o.n_predict, o.repeat);
      fmt::print("{:>4} {:>12} {:>12} {:>10} {:>8} {:>14}\n", "P", "prompt t/s", "decode t/s",
                 "TPOT ms", "vs P=1", "roofline t/s");
      for (const auto& r : rows)
        fmt::print("{:>4} {:>12.1f} {:>12.2f} {:>10.2f} {:>7.2f}x {:>14.2f}{}\n", r.P, r.prompt_tps,
                   r.decode_tps, r.tpot_ms, r.speedup, r.roofline_tps,
                   r.same_tokens ? "" : "  (sequence 0's tokens differ from P = 1!)");
      fmt::print(
          "roofline   P x bandwidth / weight bytes a P-row pass reads (KV reads not "
          "counted)\n");
    }
    if (!all_same) {
      std::cerr << "bench: a sequence's greedy tokens changed with the number beside it\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench: " << error_text(e) << '\n';
    return 1;
  }
}

}  // namespace epyctune::engine_cli
