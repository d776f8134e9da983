// epyctune-engine bench --model M [-b 1,2,4,8,16] [--passes N] [-r R]
//                       [--threads N | --cpus LIST] [--json] [-d P]
//                       [--hugepages] [--numa POLICY] [--kv f16|f32] [--isa ISA]
//
// Per batch size K: the time of one forward pass of K tokens appended after a
// P-token context (median, min, max over R repetitions of N passes each), tokens/s,
// and the weight bytes the pass reads. Alongside: this host's read bandwidth
// measured on the same CPUs, the roofline for single-token decode
// (bandwidth / bytes per token) and how close batch 1 gets to it, the K=8 vs
// K=1 pass-time ratio, and load time against a plain read() of the file.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "apps/epyctune-engine/bench_parallel.hpp"
#include "apps/epyctune-engine/bench_spec.hpp"
#include "apps/epyctune-engine/commands.hpp"
#include "apps/epyctune-engine/engine_options.hpp"
#include "apps/epyctune-engine/launch_options.hpp"
#include "apps/epyctune-engine/llama_flags.hpp"
#include "apps/epyctune-engine/progress.hpp"
#include "common/cpulist.hpp"
#include "common/elapsed.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/model/llama_model.hpp"
#include "engine/placement/launch_setup.hpp"
#include "engine/runtime/bandwidth.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/runtime/weight_memory.hpp"

namespace epyctune::engine_cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string model;
  std::vector<int> batches{1, 2, 4, 8, 16};
  int passes = 4;
  int repeat = 5;
  int threads = 0;
  std::string cpus;
  int ctx = 32;
  bool json = false;
  bool hugepages = false;
  bool mmap = false;
  bool no_pack = false;
  int experts_per_token = 0;
  std::string numa = "none";
  std::string kv = "f16";
  std::string isa;
  int bw_mib = 1024;
  engine::placement::LaunchOptions launch;
  SpecBenchOptions spec;  // --draft / --spec: plain vs speculative decoding instead
};

struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v.front(), v.back()};
}

// CPU seconds (user + system) this process has used, all threads.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Sequential read() of the whole file in 8 MiB pieces: what loading costs when
// it is bound by the disk (or the page cache, when the file is cached).
double time_file_read(const std::string& path, uint64_t& bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  std::vector<char> buf(size_t{8} << 20);
  auto t0 = Clock::now();
  bytes = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n <= 0) break;
    bytes += static_cast<uint64_t>(n);
  }
  double s = common::seconds_since(t0);
  ::close(fd);
  return s;
}

void select_isa(const std::string& name) {
  using engine::kernels::Isa;
  for (auto isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512vnni})
    if (name == engine::kernels::isa_name(isa)) return engine::kernels::set_isa(isa);
  throw std::invalid_argument("--isa: expected scalar, avx2, avx512 or avx512vnni");
}

engine::ModelOptions model_options(const BenchOptions& o, int max_k) {
  using namespace engine;
  ModelOptions mo;
  mo.prefault = true;
  mo.hugepages = o.hugepages;
  mo.numa = parse_numa_flag(o.numa).policy.value_or(runtime::NumaPolicy::local);
  mo.copy_weights = !o.mmap;
  mo.pack_weights = !o.no_pack;
  mo.experts_per_token = o.experts_per_token;
  mo.shared_weights = o.launch.shared_weights;
  if (o.mmap && (o.hugepages || mo.numa != runtime::NumaPolicy::none))
    throw std::invalid_argument("--mmap uses the file mapping in place: drop --hugepages/--numa");
  if (o.kv != "f16" && o.kv != "f32") throw std::invalid_argument("--kv: expected f16 or f32");
  mo.kv_type = o.kv == "f16" ? GgmlType::F16 : GgmlType::F32;
  mo.max_batch = std::max(64, max_k);
  return mo;
}

// The timed passes: per repetition, a bandwidth probe, then `passes` passes of
// each batch size, each truncated back to the -d depth.
struct Samples {
  std::map<int, std::vector<double>> per_pass;  // batch -> seconds per pass, per repetition
  std::map<int, double> cpu_used, wall_used;
  std::vector<double> bw_rep, bw_after1;
};

Samples time_passes(const BenchOptions& o, engine::LlamaModel& model,
                    engine::runtime::ThreadPool& pool, const std::vector<int32_t>& toks,
                    std::vector<float>& logits) {
  Samples sm;
  for (int k : o.batches) {
    std::span<const int32_t> batch(toks.data(), k);
    model.forward(batch, logits.data());  // warm-up
    model.truncate(o.ctx);
  }
  // Repetitions run outermost, each after its own bandwidth probe: a host's
  // bandwidth can drift from minute to minute, so the roofline ratio and
  // K=8/K=1 are taken within one repetition, then medianed.
  const size_t rep_probe = std::min<size_t>(size_t(o.bw_mib) << 20, size_t{512} << 20);
  for (int r = 0; r < o.repeat; ++r) {
    sm.bw_rep.push_back(engine::runtime::measure_read_bandwidth(pool, rep_probe, 3).median_gbps);
    for (int k : o.batches) {
      std::span<const int32_t> batch(toks.data(), k);
      // The share of the pool's CPUs the passes really got: on a shared host
      // (other jobs, a VM's steal) a figure far below 1 explains slow passes.
      const double cpu0 = cpu_seconds();
      auto t1 = Clock::now();
      for (int p = 0; p < o.passes; ++p) {
        model.forward(batch, logits.data());
        model.truncate(o.ctx);
      }
      const double wall = common::seconds_since(t1);
      sm.per_pass[k].push_back(wall / o.passes);
      sm.cpu_used[k] += cpu_seconds() - cpu0;
      sm.wall_used[k] += wall;
      // The single-token passes are bracketed by probes: the roofline
      // they are held against is the mean of the two, so a bandwidth
      // shift during them moves both sides.
      if (k == 1)
        sm.bw_after1.push_back(
            engine::runtime::measure_read_bandwidth(pool, rep_probe, 3).median_gbps);
    }
  }
  return sm;
}

// One row per batch size: printed as a table, or returned as JSON. Fills
// median_pass (batch -> median seconds per pass).
nlohmann::json batch_rows(const BenchOptions& o, const engine::LlamaModel& model, int pool_size,
                          Samples& sm, std::map<int, double>& median_pass) {
  nlohmann::json jb = nlohmann::json::array();
  if (!o.json)
    fmt::print("{:>5} {:>12} {:>12} {:>12} {:>10} {:>12} {:>10} {:>9} {:>10}\n", "batch",
               "pass ms (med)", "min", "max", "tok/s", "weights MB", "eff GB/s", "CPU share",
               "CPU s/pass");
  for (int k : o.batches) {
    const double cpu_share = sm.cpu_used[k] / (sm.wall_used[k] * pool_size);
    // CPU seconds one pass costs, whoever else runs: the compute side of the
    // roofline (includes brief spinning at joins).
    const double cpu_per_pass = sm.cpu_used[k] / (o.repeat * o.passes);
    Stats s = stats(sm.per_pass[k]);
    median_pass[k] = s.median;
    uint64_t bytes = model.weight_bytes_per_pass(k);
    double tps = k / s.median, eff = bytes / s.median / 1e9;
    if (o.json) {
      jb.push_back({{"batch", k},
                    {"pass_s", {{"median", s.median}, {"min", s.min}, {"max", s.max}}},
                    {"tokens_per_s", {{"median", tps}, {"min", k / s.max}, {"max", k / s.min}}},
                    {"weight_bytes_per_pass", bytes},
                    {"effective_gbps", eff},
                    {"cpu_share", cpu_share},
                    {"cpu_s_per_pass", cpu_per_pass},
                    {"samples_s", sm.per_pass[k]}});
    } else {
      fmt::print(
          "{:>5} {:>12.2f} {:>12.2f} {:>12.2f} {:>10.2f} {:>12.1f} {:>10.2f} {:>8.0f}% "
          "{:>10.3f}\n",
          k, s.median * 1e3, s.min * 1e3, s.max * 1e3, tps, bytes / 1e6, eff, cpu_share * 100,
          cpu_per_pass);
    }
  }
  return jb;
}

// Fork/join cost: regions one single-token pass issues, and the latency of
// an empty region on this pool (spinning workers, or futex wake-ups).
struct PoolCost {
  uint64_t regions_per_pass = 0;
  double region_us = 0;
};
PoolCost measure_pool(const BenchOptions& o, engine::LlamaModel& model,
                      engine::runtime::ThreadPool& pool, const std::vector<int32_t>& toks,
                      std::vector<float>& logits) {
  PoolCost pc;
  const uint64_t reg0 = pool.regions();
  model.forward(std::span<const int32_t>(toks.data(), 1), logits.data());
  model.truncate(o.ctx);
  pc.regions_per_pass = pool.regions() - reg0;
  constexpr int kEmpty = 2000;
  const auto te = Clock::now();
  for (int i = 0; i < kEmpty; ++i) pool.run([](int) {});
  pc.region_us = common::seconds_since(te) / kEmpty * 1e6;
  return pc;
}

// Everything run_bench measured, for the JSON document and the text report.
struct BenchResult {
  double read_s = 0, load_s = 0;
  uint64_t file_bytes = 0;
  engine::runtime::BandwidthResult bw;
  Samples sm;
  std::map<int, double> median_pass;
  std::vector<double> roof_rep, k8_rep;  // within-repetition ratios
  PoolCost pool_cost;
  nlohmann::json batches;
};

void within_repetition_ratios(const BenchOptions& o, const engine::LlamaModel& model,
                              BenchResult& r) {
  auto& pp = r.sm.per_pass;
  const double bytes1 = static_cast<double>(model.weight_bytes_per_pass(1));
  for (int i = 0; i < o.repeat; ++i) {
    if (pp.count(1))
      r.roof_rep.push_back((1.0 / pp[1][i]) /
                           (0.5 * (r.sm.bw_rep[i] + r.sm.bw_after1[i]) * 1e9 / bytes1));
    if (pp.count(1) && pp.count(8)) r.k8_rep.push_back(pp[8][i] / pp[1][i]);
  }
}

nlohmann::json report_json(const BenchOptions& o, const engine::LlamaModel& model,
                           const engine::runtime::ThreadPool& pool, const BenchResult& r) {
  using namespace engine;
  const auto& lr = model.load_report();
  const uint64_t bytes_per_token = model.weight_bytes_per_pass(1);
  const double roofline_tps = r.bw.median_gbps * 1e9 / bytes_per_token;
  nlohmann::json j;
  j["model"] = o.model;
  j["config"] = {{"name", model.config().name},
                 {"dim", model.config().dim},
                 {"layers", model.config().n_layers},
                 {"experts", model.config().n_expert},
                 {"experts_per_token", model.config().n_expert_used},
                 {"weight_type", std::string(traits(model.weight_type()).name)}};
  j["cpus"] = common::format_cpulist(pool.cpus());
  j["threads"] = pool.size();
  j["isa"] = kernels::isa_name(kernels::active_isa());
  j["stream_hint"] = kernels::stream_hint_name(kernels::stream_hint());
  j["context_tokens"] = o.ctx;
  j["passes_per_repeat"] = o.passes;
  j["repeats"] = o.repeat;
  j["batches"] = r.batches;
  j["bandwidth_gbps"] = {{"median", r.bw.median_gbps},
                         {"min", r.bw.min_gbps},
                         {"max", r.bw.max_gbps},
                         {"buffer_bytes", r.bw.buffer_bytes}};
  j["bytes_per_token"] = bytes_per_token;
  j["roofline_tokens_per_s"] = roofline_tps;
  j["bandwidth_per_repeat_gbps"] = r.sm.bw_rep;
  if (!r.sm.bw_after1.empty()) j["bandwidth_after_batch1_gbps"] = r.sm.bw_after1;
  if (!r.roof_rep.empty()) {
    const Stats rs = stats(r.roof_rep);
    j["roofline_ratio"] = rs.median;
    j["roofline_ratio_range"] = {rs.min, rs.max};
    j["roofline_ratio_vs_median_bandwidth"] = (1.0 / r.median_pass.at(1)) / roofline_tps;
  }
  if (!r.k8_rep.empty()) {
    const Stats ks = stats(r.k8_rep);
    j["k8_over_k1_time"] = ks.median;
    j["k8_over_k1_range"] = {ks.min, ks.max};
  }
  j["load"] = {{"total_s", r.load_s},
               {"parse_validate_s", lr.open_s},
               {"copy_s", lr.copy_s},
               {"prefault_s", lr.prefault_s},
               {"file_read_s", r.read_s},
               {"file_bytes", r.file_bytes},
               {"file_read_gbps", r.file_bytes / r.read_s / 1e9},
               {"pages", runtime::page_kind_name(lr.pages)},
               {"packed_bytes", lr.packed_bytes},
               {"note", lr.page_note}};
  j["placement"] = model.placement_summary();
  j["weights"] = placement::weights_json(model);
  j["pool"] = {{"regions_per_token_pass", r.pool_cost.regions_per_pass},
               {"empty_region_us", r.pool_cost.region_us}};
  return j;
}

void print_report(const BenchOptions& o, const engine::LlamaModel& model,
                  const engine::runtime::ThreadPool& pool, const BenchResult& r) {
  using namespace engine;
  const auto& lr = model.load_report();
  const auto& bw = r.bw;
  const uint64_t bytes_per_token = model.weight_bytes_per_pass(1);
  const double roofline_tps = bw.median_gbps * 1e9 / bytes_per_token;
  fmt::print("\nmodel      {} ({}, {} layers, dim {}), {} threads on CPUs {}, ISA {}, prefetch {}\n",
             o.model, traits(model.weight_type()).name, model.config().n_layers, model.config().dim,
             pool.size(), common::format_cpulist(pool.cpus()),
             kernels::isa_name(kernels::active_isa()),
             kernels::stream_hint_name(kernels::stream_hint()));
  fmt::print("bandwidth  {:.2f} GB/s read (median of 7, min {:.2f}, max {:.2f}; {} MiB buffer)\n",
             bw.median_gbps, bw.min_gbps, bw.max_gbps, bw.buffer_bytes >> 20);
  fmt::print("roofline   {:.2f} tok/s = {:.2f} GB/s / {:.1f} MB per token\n", roofline_tps,
             bw.median_gbps, bytes_per_token / 1e6);
  if (!r.roof_rep.empty()) {
    const Stats rs = stats(r.roof_rep);
    std::vector<double> all_bw = r.sm.bw_rep;
    all_bw.insert(all_bw.end(), r.sm.bw_after1.begin(), r.sm.bw_after1.end());
    const Stats bs = stats(all_bw);
    fmt::print(
        "batch 1    {:.2f} tok/s = {:.1f}% of the roofline (median of {} repeats, each against "
        "the probes just before and after it: {:.1f}-{:.1f}%; probes {:.1f}-{:.1f} GB/s)\n",
        1.0 / r.median_pass.at(1), 100.0 * rs.median, r.roof_rep.size(), 100.0 * rs.min,
        100.0 * rs.max, bs.min, bs.max);
  }
  if (!r.k8_rep.empty()) {
    const Stats ks = stats(r.k8_rep);
    fmt::print("K=8 / K=1  {:.2f}x the time of a single-token pass (per repeat {:.2f}-{:.2f}x)\n",
               ks.median, ks.min, ks.max);
  }
  fmt::print(
      "load       {:.2f} s total: parse+validate {:.3f} s, copy {:.2f} s, page-in {:.2f} s"
      " ({}); plain read() of the file {:.2f} s ({:.2f} GB/s)\n",
      r.load_s, lr.open_s, lr.copy_s, lr.prefault_s, runtime::page_kind_name(lr.pages), r.read_s,
      r.file_bytes / r.read_s / 1e9);
  fmt::print("layout     {:.2f} GB of {:.2f} GB weights repacked to packed16{}\n",
             lr.packed_bytes / 1e9, lr.weight_bytes / 1e9,
             o.mmap ? " (--mmap: ggml layout in place)" : "");
  if (!lr.page_note.empty()) fmt::print("note       {}\n", lr.page_note);
  fmt::print("pool       {} parallel regions per single-token pass, {:.2f} us per empty region\n",
             r.pool_cost.regions_per_pass, r.pool_cost.region_us);
  fmt::print("placement  {}\n", model.placement_summary());
}

// --cpus or --threads; with --numa isolate, only those on this node.
std::vector<int> bench_cpus(const BenchOptions& o) {
  if (!parse_numa_flag(o.numa).isolate)
    return o.cpus.empty() ? engine::runtime::first_cpus(o.threads) : cpus_flag(o.cpus);
  int node = 0;
  auto cpus = engine::runtime::cpus_on_this_node(
      o.cpus.empty() ? engine::runtime::allowed_cpus() : cpus_flag(o.cpus), node);
  if (cpus.empty())
    throw std::invalid_argument("--numa isolate: none of the CPUs is on node " +
                                std::to_string(node) + ", where this process runs");
  if (o.threads > 0 && static_cast<size_t>(o.threads) < cpus.size()) cpus.resize(o.threads);
  return cpus;
}

// A launch config's partition: the target's pool on its verify CPUs, its
// workers in the verify group, its weights on the target nodes.
std::unique_ptr<engine::placement::LaunchSetup> open_launch(const BenchOptions& o) {
  if (o.launch.launch_config.empty()) return nullptr;
  if (!o.cpus.empty() || o.threads > 0 || o.mmap || o.numa != "none" || o.hugepages)
    throw std::invalid_argument(
        "--launch-config sets CPUs and memory: drop --cpus/--threads/--numa/--hugepages/--mmap");
  return std::make_unique<engine::placement::LaunchSetup>(o.launch);
}

// The model on the pool, placed as the launch config says, timed into r.
std::unique_ptr<engine::LlamaModel> load_model(const BenchOptions& o,
                                               engine::runtime::ThreadPool& pool,
                                               engine::placement::LaunchSetup* launch, int max_k,
                                               BenchResult& r) {
  engine::ModelOptions mo = model_options(o, max_k);
  if (launch) launch->apply_memory_policy(mo, launch::Role::verify);
  ProgressLine line("load");
  if (line.enabled())
    mo.progress = [&](std::string_view stage, uint64_t done, uint64_t total) {
      line.update(stage, done >> 20, total >> 20, "MiB");
    };
  auto t0 = Clock::now();
  auto model = engine::LlamaModel::load(o.model, pool, mo);
  r.load_s = common::seconds_since(t0);
  line.finish();
  if (launch) {
    launch->bind_kv(*model, launch::Role::verify);
    if (launch->has_partition()) launch->record_driver(launch::Role::verify, pool);
    if (auto e = launch->thread_errors(); !e.empty())
      throw std::runtime_error("threads are not where the launch config puts them:\n" + e);
  }
  if (o.ctx + max_k > model->n_ctx())
    throw std::invalid_argument(fmt::format(
        "-d/--n-depth {} + batch {} exceeds the model's n_ctx {}", o.ctx, max_k, model->n_ctx()));
  return model;
}

// Bandwidth, then the passes after a context of o.ctx tokens.
void measure(const BenchOptions& o, engine::LlamaModel& model, engine::runtime::ThreadPool& pool,
             int max_k, BenchResult& r) {
  r.bw = engine::runtime::measure_read_bandwidth(pool, size_t(o.bw_mib) << 20, 7);
  const int V = model.n_vocab();
  std::vector<float> logits(size_t(V) * max_k);
  std::vector<int32_t> toks(std::max(o.ctx, max_k));
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>((i * 7919 + 13) % V);
  model.forward(std::span<const int32_t>(toks).first(o.ctx), nullptr);
  r.sm = time_passes(o, model, pool, toks, logits);
  r.batches = batch_rows(o, model, pool.size(), r.sm, r.median_pass);
  within_repetition_ratios(o, model, r);
  r.pool_cost = measure_pool(o, model, pool, toks, logits);
}

int run_bench(const BenchOptions& o) {
  using namespace engine;
  try {
    if (!o.isa.empty()) select_isa(o.isa);
    auto launch = open_launch(o);
    std::vector<int> cpus = bench_cpus(o);
    auto pool_ptr = launch && launch->has_partition()
                        ? launch->make_pool(launch::Role::verify)
                        : std::make_unique<runtime::ThreadPool>(cpus, true);
    runtime::ThreadPool& pool = *pool_ptr;
    BenchResult r;
    r.read_s = time_file_read(o.model, r.file_bytes);
    const int max_k = *std::max_element(o.batches.begin(), o.batches.end());
    auto model = load_model(o, pool, launch.get(), max_k, r);
    measure(o, *model, pool, max_k, r);
    const std::string mismatch = launch ? launch->check(*model, nullptr) : "";
    if (o.json) {
      auto j = report_json(o, *model, pool, r);
      j["launch"] = launch ? launch->report() : nlohmann::json(nullptr);
      std::cout << j.dump(2) << '\n';
    } else {
      print_report(o, *model, pool, r);
      if (launch)
        for (const auto& l : launch->report_lines()) fmt::print("launch     {}\n", l);
    }
    if (!mismatch.empty()) {
      std::cerr << "bench: threads or memory are not where the launch config puts them:\n"
                << mismatch << '\n';
      return kExitPlacement;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench: " << error_text(e) << '\n';
    return 1;
  }
}

void add_bench_command(CLI::App& app, GlobalOptions& global) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Forward-pass timings per batch size vs the roofline");
  cmd->add_option("--model,-m", o->model, "llama GGUF model")->required()->check(CLI::ExistingFile);
  cmd->add_option("-b,--batch-size,--batch", o->batches, "batch sizes (tokens per pass)")
      ->delimiter(',')
      ->check(CLI::Range(1, 512));
  // As llama-bench: -r repetitions, -t threads. -n (tokens generated, in
  // generate and llama-bench) has no meaning here: every pass is truncated
  // back to the same context.
  cmd->add_option("--passes", o->passes, "forward passes per repetition and batch size")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("-r,--repetitions", o->repeat, "repetitions (median, min, max over them)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  auto* th = cmd->add_option("--threads,-t", o->threads, "threads: the first N allowed CPUs");
  cmd->add_option("--cpus", o->cpus, "CPU list to pin the pool to, e.g. 0-7")->excludes(th);
  // llama-bench's -d: the depth each pass runs at. Not a context length
  // (generate's -c): every pass is truncated back to it.
  cmd->add_option("-d,--n-depth,--ctx", o->ctx, "tokens already in the KV cache before each pass")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--json", o->json, "one JSON document");
  cmd->add_flag("--hugepages", o->hugepages, "copy the weights into 2 MiB pages (else THP)");
  cmd->add_option("--numa", o->numa, kNumaHelp + std::string(" (default: none, first touch)"))
      ->check(numa_flag_error)
      ->default_str("none");
  cmd->add_flag("--mmap,!--no-mmap", o->mmap,
                "use the weights in place from the file mapping (no copy, no repacking); "
                "--no-mmap: copy them (the default)");
  cmd->add_flag("--no-pack", o->no_pack, "copy the weights but keep ggml's row layout");
  cmd->add_option("--kv", o->kv, "KV cache type: f16|f32");
  cmd->add_option("--experts-per-token", o->experts_per_token,
                  "MoE models: experts run per token (default: the model's expert_used_count)");
  cmd->add_option("--isa", o->isa, "force kernels: scalar|avx2|avx512|avx512vnni");
  cmd->add_option("--bw-mib", o->bw_mib, "bandwidth probe buffer (MiB)")
      ->check(CLI::Range(16, 1 << 20));
  add_launch_options(cmd, o->launch);
  auto& sp = o->spec;
  sp.prompt = "The quick brown fox jumps over the lazy dog. Once upon a time";
  auto* draft = cmd->add_option("--model-draft,--draft", sp.draft,
                                "Draft model, also -md: decode plain and speculative side by side "
                                "instead")
                    ->check(CLI::ExistingFile);
  cmd->add_option("--threads-draft", sp.draft_threads,
                  "With a draft: its threads, also -td (the last N CPUs draft)");
  auto* spec = cmd->add_option("--spec", sp.spec, "Speculative configurations: adaptive and/or K")
                   ->delimiter(',');
  auto* n = cmd->add_option("-n,--n-predict,--predict", sp.n_predict,
                            "Tokens per decode (with --model-draft/--spec/--parallel only: plain "
                            "passes are --passes)")
                ->capture_default_str();
  cmd->add_option("--prompt,-p", sp.prompt, "Prompt text (speculative bench)");
  add_spec_mode_option(cmd, sp.spec_mode);
  cmd->add_option("--lookup", sp.lookup, "N-gram lookup drafting: longest n-gram N (0 = off)");
  cmd->add_flag(
      "--no-cost-cache", [&sp](int64_t) { sp.cost_cache = false; },
      "Measure pass times afresh instead of reading the cached ones");
  auto par = std::make_shared<ParallelBenchOptions>();
  auto* parallel = cmd->add_option("--parallel", par->parallel,  // also -np
                                   "Sequences decoding at once, e.g. 1,2,4,8: aggregate tok/s "
                                   "per count instead (prompt tokens per sequence: -d); "
                                   "also -np")
                       ->delimiter(',')
                       ->check(CLI::Range(1, 256))
                       ->excludes(draft)
                       ->excludes(spec);
  cmd->callback([o, par, &global, draft, spec, n, parallel] {
    const BenchRunOptions run{o->model, o->repeat, o->threads, o->cpus, o->json, o->bw_mib};
    if (parallel->count() > 0) {
      auto p = *par;
      static_cast<BenchRunOptions&>(p) = run;
      p.prompt_tokens = o->ctx;
      p.n_predict = n->count() > 0 ? o->spec.n_predict : 32;
      p.kv = o->kv;
      return void(global.exit_code = run_parallel_bench(p));
    }
    if (draft->count() + spec->count() == 0) {
      if (n->count() > 0)
        throw CLI::ValidationError(
            "-n",
            "tokens to decode: only with --model-draft, --spec or --parallel; "
            "forward passes per repetition are --passes");
      return void(global.exit_code = run_bench(*o));
    }
    auto s = o->spec;
    static_cast<BenchRunOptions&>(s) = run;
    global.exit_code = run_spec_bench(s);
  });
}

static Registrar reg(&add_bench_command);

}  // namespace
}  // namespace epyctune::engine_cli
