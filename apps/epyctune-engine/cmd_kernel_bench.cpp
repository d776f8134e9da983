// epyctune-engine kernel-bench: GB/s of weights streamed by matmul_rows per
// type, ISA and token batch, next to a plain read-bandwidth probe. A
// micro-benchmark for kernel work; the model-level bench lives elsewhere.
// Weights and probe live in transparent-hugepage memory, as the engine's
// copied weights do: with 4 KiB pages the hardware prefetchers stop at every
// page and TLB misses hide what the kernels themselves cost.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "apps/epyctune-engine/commands.hpp"
#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernels.hpp"
#include "engine/runtime/weight_memory.hpp"

namespace epyctune::engine_cli {
namespace {

namespace k = epyctune::engine::kernels;
using epyctune::engine::GgmlType;
using Clock = std::chrono::steady_clock;

struct KernelBenchOptions {
  std::vector<std::string> types = {"q4_0", "q8_0", "q4_k", "q6_k"};
  std::vector<std::string> isas;  // default: all available
  std::vector<int> tokens = {1, 8};
  std::vector<std::string> layouts = {"ggml", "packed16"};
  std::vector<std::string> hints;  // default: this CPU's
  int64_t cols = 4096;
  int64_t rows = 0;  // 0: enough rows for --mb
  int mb = 512;
  int threads = 1;
  int repeat = 7;
  int loops = 1;
};

bool parse_type(const std::string& s, GgmlType& t) {
  static const std::pair<const char*, GgmlType> names[] = {
      {"f32", GgmlType::F32},   {"f16", GgmlType::F16},    {"bf16", GgmlType::BF16},
      {"q4_0", GgmlType::Q4_0}, {"q8_0", GgmlType::Q8_0},  {"q4_k", GgmlType::Q4_K},
      {"q6_k", GgmlType::Q6_K}, {"q5_0", GgmlType::Q5_0},  {"q5_1", GgmlType::Q5_1},
      {"q5_k", GgmlType::Q5_K}, {"mxfp4", GgmlType::MXFP4}};
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const auto& [n, v] : names) {
    if (l == n) {
      t = v;
      return true;
    }
  }
  return false;
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Timing {
  double best = 0;  // fastest pass's wall seconds (least disturbed by other load)
  double wall = 0;  // seconds
  double cpu = 0;   // the busiest thread's CPU seconds (robust on a shared machine)
};

// Runs fn(thread_index) on n threads.
template <class Fn>
Timing timed_parallel(int n, Fn fn) {
  std::vector<double> cpu(static_cast<size_t>(n));
  auto body = [&](int i) {
    const double c0 = thread_cpu_seconds();
    fn(i);
    cpu[static_cast<size_t>(i)] = thread_cpu_seconds() - c0;
  };
  std::vector<std::thread> ts;
  const auto t0 = Clock::now();
  for (int i = 1; i < n; ++i) ts.emplace_back(body, i);
  body(0);
  for (auto& t : ts) t.join();
  Timing t;
  t.wall = std::chrono::duration<double>(Clock::now() - t0).count();
  t.cpu = *std::max_element(cpu.begin(), cpu.end());
  return t;
}

Timing median_timing(std::vector<Timing> v) {
  Timing m;
  std::vector<double> w, c;
  for (const auto& t : v) {
    w.push_back(t.wall);
    c.push_back(t.cpu);
  }
  std::sort(w.begin(), w.end());
  std::sort(c.begin(), c.end());
  m.wall = w[w.size() / 2];
  m.best = w.front();
  m.cpu = c[c.size() / 2];
  return m;
}

// Read bandwidth: every thread sums its slice of buf, 8 bytes at a time.
Timing probe_read(const uint64_t* buf, size_t n, int threads, int repeat) {
  std::vector<Timing> times;
  std::vector<uint64_t> sink(static_cast<size_t>(threads) * 8);
  for (int r = 0; r < repeat; ++r) {
    times.push_back(timed_parallel(threads, [&](int i) {
      const size_t b = n * static_cast<size_t>(i) / threads;
      const size_t e = n * static_cast<size_t>(i + 1) / threads;
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      size_t j = b;
      for (; j + 4 <= e; j += 4) {
        s0 += buf[j];
        s1 += buf[j + 1];
        s2 += buf[j + 2];
        s3 += buf[j + 3];
      }
      sink[static_cast<size_t>(i) * 8] = s0 + s1 + s2 + s3;
    }));
  }
  return median_timing(times);
}

int run_bench(const KernelBenchOptions& o) {
  const int64_t cols = o.cols;
  std::vector<k::Isa> isas;
  if (o.isas.empty()) {
    for (int i = 0; i <= static_cast<int>(k::best_isa()); ++i)
      isas.push_back(static_cast<k::Isa>(i));
  } else {
    for (const auto& s : o.isas) {
      bool found = false;
      for (int i = 0; i <= 3; ++i) {
        if (s == k::isa_name(static_cast<k::Isa>(i))) {
          if (i > static_cast<int>(k::best_isa())) {
            fmt::print(stderr, "kernel-bench: unsupported: this CPU lacks {}\n", s);
            return 2;
          }
          isas.push_back(static_cast<k::Isa>(i));
          found = true;
        }
      }
      if (!found) {
        fmt::print(stderr, "kernel-bench: unknown --isa '{}' (scalar, avx2, avx512, avx512vnni)\n",
                   s);
        return 2;
      }
    }
  }
  // Validate every type and layout before spending time on the probe.
  struct TypeRun {
    std::string name;
    GgmlType t;
    k::detail::Geometry g;
  };
  std::vector<TypeRun> runs;
  for (const auto& tname : o.types) {
    TypeRun tr{tname, GgmlType::F32, {}};
    if (!parse_type(tname, tr.t) || !k::detail::geometry(tr.t, tr.g)) {
      fmt::print(stderr, "kernel-bench: unknown --type '{}' (f32 f16 bf16 q4_0 q8_0 q4_k q6_k)\n",
                 tname);
      return 2;
    }
    if (cols % tr.g.block_elems != 0) {
      fmt::print(stderr, "kernel-bench: --cols {} is not a multiple of {}'s block size {}\n", cols,
                 tname, tr.g.block_elems);
      return 2;
    }
    runs.push_back(tr);
  }
  std::vector<k::WeightLayout> all_layouts;
  for (const auto& l : o.layouts) {
    if (l == "ggml") {
      all_layouts.push_back(k::WeightLayout::ggml);
    } else if (l == "packed16") {
      all_layouts.push_back(k::WeightLayout::packed16);
    } else {
      fmt::print(stderr, "kernel-bench: unknown --layout '{}' (ggml, packed16)\n", l);
      return 2;
    }
  }
  const size_t probe_bytes = static_cast<size_t>(o.mb) << 20;
  namespace rt = epyctune::engine::runtime;
  rt::PageKind pages = rt::PageKind::thp;
  double probe = 0, probe_cpu = 0;
  {
    rt::WeightMemory probe_mem = rt::WeightMemory::allocate(probe_bytes, false);
    pages = probe_mem.kind();
    auto* buf = reinterpret_cast<uint64_t*>(probe_mem.data());
    std::fill(buf, buf + probe_bytes / 8, uint64_t{1});
    const Timing pt = probe_read(buf, probe_bytes / 8, o.threads, o.repeat);
    probe = static_cast<double>(probe_bytes) / pt.wall / 1e9;
    probe_cpu = static_cast<double>(probe_bytes) / pt.cpu / 1e9;
  }
  fmt::print(
      "read-bandwidth probe: {:.1f} GB/s wall, {:.1f} GB/s per CPU-second ({} MiB, {} thread(s), "
      "{} pages)\n",
      probe, probe_cpu, o.mb, o.threads, rt::page_kind_name(pages));
  fmt::print(
      "(GB/s = weight bytes / median wall time; cpuGB/s = weight bytes / busiest thread's\n"
      " CPU time; bestGB/s = weight bytes / fastest pass: robust when others share the cores;\n"
      " prep_us = prepare_acts time per token row)\n");
  std::vector<k::StreamHint> hints;
  for (const auto& h : o.hints)
    hints.push_back(h == "nta" ? k::StreamHint::nta : k::StreamHint::t0);
  if (hints.empty()) hints.push_back(k::default_stream_hint());
  fmt::print("{:<6} {:<8} {:<11} {:<4} {:>6} {:>8} {:>7} {:>9} {:>8} {:>8} {:>8} {:>7} {:>8}\n",
             "type", "layout", "isa", "hint", "tokens", "rows", "cols", "ms/pass", "GB/s",
             "cpuGB/s", "bestGB/s", "%probe", "prep_us");
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const TypeRun& tr : runs) {
    const GgmlType t = tr.t;
    const k::detail::Geometry& g = tr.g;
    const std::string& tname = tr.name;
    const size_t row_bytes = static_cast<size_t>(cols / g.block_elems) * g.block_bytes;
    const int64_t rows =
        o.rows > 0 ? o.rows
                   : std::max<int64_t>(o.threads, static_cast<int64_t>(probe_bytes / row_bytes));
    // A few distinct quantized rows, replicated: real values, cheap to build.
    const size_t w_bytes = row_bytes * static_cast<size_t>(rows);
    rt::WeightMemory w_mem = rt::WeightMemory::allocate(w_bytes, false);
    uint8_t* w = w_mem.data();
    std::vector<float> src(static_cast<size_t>(cols));
    for (int64_t r = 0; r < std::min<int64_t>(rows, 16); ++r) {
      for (auto& v : src) v = dist(rng) * 0.05f;
      k::quantize_row(t, src.data(), w + r * row_bytes, cols);
    }
    for (int64_t r = 16; r < rows; ++r)
      std::memcpy(w + r * row_bytes, w + (r % 16) * row_bytes, row_bytes);
    std::vector<k::WeightLayout> layouts;
    for (k::WeightLayout l : all_layouts)
      if (l == k::WeightLayout::ggml || k::has_packed_layout(t)) layouts.push_back(l);
    rt::WeightMemory wp_mem;
    if (std::find(layouts.begin(), layouts.end(), k::WeightLayout::packed16) != layouts.end()) {
      wp_mem = rt::WeightMemory::allocate(w_bytes, false);
      std::memcpy(wp_mem.data(), w, w_bytes);
      k::pack_rows(t, wp_mem.data(), row_bytes, rows, cols);
    }
    for (int nt : o.tokens) {
      std::vector<float> x(static_cast<size_t>(nt * cols));
      for (auto& v : x) v = dist(rng);
      std::vector<float> y(static_cast<size_t>(nt * rows));
      for (k::WeightLayout layout : layouts)
        for (k::Isa isa : isas)
          for (k::StreamHint hint : hints) {
            k::set_isa(isa);
            k::set_stream_hint(hint);
            const uint8_t* wl = layout == k::WeightLayout::packed16 ? wp_mem.data() : w;
            k::Acts acts;
            k::prepare_acts(t, x.data(), nt, cols, acts);
            auto pass = [&](int i) {
              // Split at 16-row panels (packed matrices need it).
              const int64_t panels = (rows + 15) / 16;
              const int64_t r0 = std::min(rows, panels * i / o.threads * 16);
              const int64_t r1 = std::min(rows, panels * (i + 1) / o.threads * 16);
              for (int l = 0; l < o.loops; ++l)
                k::matmul_rows(t, layout, wl, row_bytes, acts, y.data(), rows, r0, r1);
            };
            // Scalar is slow: one pass tells its speed well enough.
            const int reps = isa == k::Isa::scalar ? 1 : o.repeat;
            timed_parallel(o.threads, pass);  // warm-up
            std::vector<Timing> times;
            for (int r = 0; r < reps; ++r) times.push_back(timed_parallel(o.threads, pass));
            const Timing s = median_timing(times);
            const double streamed = static_cast<double>(w_bytes) * o.loops;
            const double gbs = streamed / s.wall / 1e9;
            const double cgbs = streamed / s.cpu / 1e9;
            const double bgbs = streamed / s.best / 1e9;
            // Activation quantization cost, per token row (once per matmul).
            std::vector<double> prep;
            for (int r = 0; r < 5; ++r) {
              const auto p0 = Clock::now();
              k::prepare_acts(t, x.data(), nt, cols, acts);
              prep.push_back(std::chrono::duration<double>(Clock::now() - p0).count() / nt);
            }
            std::sort(prep.begin(), prep.end());
            fmt::print(
                "{:<6} {:<8} {:<11} {:<4} {:>6} {:>8} {:>7} {:>9.3f} {:>8.1f} {:>8.1f} {:>8.1f} "
                "{:>6.0f}% {:>8.1f}\n",
                tname, layout == k::WeightLayout::packed16 ? "packed16" : "ggml", k::isa_name(isa),
                k::stream_hint_name(hint), nt, rows, cols, s.wall * 1e3 / o.loops, gbs, cgbs, bgbs,
                100.0 * gbs / probe, prep.front() * 1e6);
          }
    }
  }
  return 0;
}

void add_kernel_bench_command(CLI::App& app, GlobalOptions& global) {
  auto opts = std::make_shared<KernelBenchOptions>();
  auto* cmd = app.add_subcommand("kernel-bench", "GB/s of weights streamed by the matmul kernels");
  cmd->add_option("--type", opts->types, "weight types (f32 f16 bf16 q4_0 q8_0 q4_k q6_k)")
      ->delimiter(',');
  cmd->add_option("--isa", opts->isas, "ISAs to run (default: all this CPU has)")->delimiter(',');
  cmd->add_option("-b,--batch-size,--tokens", opts->tokens,
                  "token batch sizes (rows per matmul), as bench -b")
      ->delimiter(',');
  cmd->add_option("--layout", opts->layouts,
                  "weight row layouts: ggml, packed16 (Q4_0/Q8_0/Q4_K repacked at load)")
      ->delimiter(',');
  cmd->add_option("--stream-hint", opts->hints,
                  "one-token prefetch hints to run: nta, t0 (default: this CPU's, nta on AMD)")
      ->check(CLI::IsMember({"nta", "t0"}))
      ->delimiter(',');
  cmd->add_option("--cols", opts->cols, "k: elements per weight row");
  cmd->add_option("--rows", opts->rows, "weight rows (default: fill --mb)");
  cmd->add_option("--mb", opts->mb, "weight matrix and probe size in MiB")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("-t,--threads", opts->threads, "threads (disjoint row ranges)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--loops", opts->loops,
                  "matmuls per timed pass: with --rows small enough for L2 (e.g. 256), "
                  "the kernels' compute rate without DRAM or thread start-up")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("-r,--repetitions", opts->repeat, "timed passes; the median is reported")
      ->check(CLI::Range(1, 1000));
  cmd->callback([opts, &global] { global.exit_code = run_bench(*opts); });
}

static Registrar reg(&add_kernel_bench_command);

}  // namespace
}  // namespace epyctune::engine_cli
