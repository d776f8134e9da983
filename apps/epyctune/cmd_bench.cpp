// `epyctune bench --profile NAME --model T.gguf [--draft D.gguf | --lookup N]
//   [--steps LIST] [-n|--tokens N] [--repeat R] [--json] [--chart FILE.svg]
//   [--from-stock] [--force]` and `epyctune bench --bandwidth`.
// Stock first, then each step of the stack on top of the previous ones, each
// configuration measured with the engine, the repeats interleaved
// (lib/bench/stepwise.hpp); everything reverted at the end, on SIGINT/SIGTERM
// and when the engine fails. docs/bench.md explains the design and the table.
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "apps/epyctune/commands.hpp"
#include "bench/bandwidth_probe.hpp"
#include "bench/engine_process.hpp"
#include "bench/interrupt.hpp"
#include "bench/report.hpp"
#include "bench/stack_driver.hpp"
#include "common/cpulist.hpp"
#include "host/discover.hpp"
#include "launch/from_profile.hpp"
#include "profile/loader.hpp"
#include "stack/apply.hpp"
#include "stack/journal.hpp"
#include "stack/revert.hpp"
#include "stack/session.hpp"

namespace epyctune::cli {
namespace {

namespace fs = std::filesystem;

struct BenchArgs {
  std::string profile, model, draft, steps, chart, prompt;
  int lookup = 0, tokens = 32, repeat = 3;
  size_t bw_mib = 256;
  bool json = false, from_stock = false, force = false, bandwidth = false;
};

// Interrupted by SIGINT/SIGTERM (after reverting): the shell convention.
int interrupted_exit() {
  return 128 + (bench::interrupt_signal() ? bench::interrupt_signal() : SIGINT);
}

// A private directory for the launch configs handed to the engine.
struct WorkDir {
  fs::path path;
  WorkDir() {
    std::string tmpl = (fs::temp_directory_path() / "epyctune-bench-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary directory");
    path = tmpl;
  }
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

int run_bandwidth(const BenchArgs& a, const GlobalOptions& g) {
  nlohmann::json out = nlohmann::json::array();
  if (!a.json)
    fmt::print("{:<10} {:>12} {:>10} {:>10} {:>10}\n", "group", "CPUs", "GB/s", "min", "max");
  for (const auto& groups : {bench::node_groups(g.sysroot), bench::l3_groups(g.sysroot)}) {
    for (const auto& grp : groups) {
      auto r = bench::probe_group(grp, a.bw_mib, 5);
      if (a.json) {
        out.push_back({{"group", grp.name},
                       {"cpus", common::format_cpulist(grp.cpus)},
                       {"probed_cpus", common::format_cpulist(r.probed_cpus)},
                       {"median_gbps", r.median_gbps},
                       {"min_gbps", r.min_gbps},
                       {"max_gbps", r.max_gbps},
                       {"unsupported", r.unsupported}});
      } else if (!r.unsupported.empty()) {
        fmt::print("{:<10} {:>12} unsupported: {}\n", grp.name, common::format_cpulist(grp.cpus),
                   r.unsupported);
      } else {
        fmt::print("{:<10} {:>12} {:>10.2f} {:>10.2f} {:>10.2f}{}\n", grp.name,
                   common::format_cpulist(r.probed_cpus), r.median_gbps, r.min_gbps, r.max_gbps,
                   r.probed_cpus == grp.cpus
                       ? ""
                       : fmt::format("  (of CPUs {}; the others are not allowed here)",
                                     common::format_cpulist(grp.cpus)));
      }
    }
  }
  if (a.json) fmt::print("{}\n", out.dump(2));
  return 0;
}

// The bench starts from stock: applied epyctune state is reverted only when
// asked, since it may be what the operator is running on.
void ensure_stock(const stack::Session& s, bool from_stock) {
  auto j = stack::Journal(s.sys).load();
  if (!j.exists) return;
  if (!from_stock)
    throw std::invalid_argument(fmt::format(
        "epyctune state is applied on this host ({} holds {} change(s)); the bench measures "
        "from stock: pass --from-stock to revert it first, or run `epyctune revert`",
        s.sys.resolve(stack::kJournalPath).string(), j.entries.size()));
  auto r = stack::revert_journal(s.sys);
  if (r.exit_code != kExitOk) throw std::runtime_error("--from-stock: revert failed: " + r.error);
}

bench::ReportContext report_context(const stack::Session& s, const BenchArgs& a) {
  bench::ReportContext c;
  c.profile = s.profile.name;
  c.model = a.model;
  c.draft = !a.draft.empty() ? a.draft : a.lookup > 0 ? fmt::format("lookup {}", a.lookup) : "";
  c.tokens = a.tokens;
  c.repeat = a.repeat;
  c.expectations_source = s.profile.expectations_source;
  c.expectations_model = s.profile.expectations_model;
  c.expectations = s.profile.expectations;
  c.launch_plan = launch::to_json(launch::plan_from_profile(s.profile, s.part));
  if (!s.sys.is_live())
    c.notes.push_back(
        fmt::format("host state goes to the fixture {}; the engine runs on this "
                    "machine's CPUs",
                    s.sys.root().string()));
  return c;
}

void fill_expectations(bench::StepwiseResult& r, const stack::Session& s) {
  for (auto& row : r.rows) {
    auto it = s.profile.expectations.find(row.ref.step == 0 ? "baseline" : row.ref.name);
    if (it != s.profile.expectations.end()) row.expected_tok_s = it->second;
  }
}

int run_bench(const BenchArgs& a, const GlobalOptions& g) {
  if (a.bandwidth) return run_bandwidth(a, g);
  if (a.profile.empty() || a.model.empty())
    throw std::invalid_argument("--profile and --model are required (or --bandwidth alone)");
  if (!a.draft.empty() && a.lookup > 0)
    throw std::invalid_argument("--draft and --lookup: give one drafter");
  bench::install_interrupt_handlers();
  auto s = open_session(g, a.profile, "", a.force);
  if (!s.partition_error.empty())
    throw std::invalid_argument("the profile's partition does not fit this host: " +
                                s.partition_error);
  ensure_stock(s, a.from_stock);
  WorkDir work;
  bench::EngineRunOptions eo;
  eo.engine = bench::find_engine("/proc/self/exe");
  eo.model = a.model;
  eo.draft = a.draft;
  eo.lookup = a.lookup;
  eo.tokens = a.tokens;
  if (!a.prompt.empty()) eo.prompt = a.prompt;
  eo.block = std::max(1, std::min(8, a.tokens / 4));
  bench::StackDriver driver(s, eo, work.path, a.bw_mib);
  bench::StepwiseOptions so;
  so.steps = bench::bench_steps(a.steps);
  so.repeat = a.repeat;
  if (::isatty(2)) so.progress = [](const std::string& l) { fmt::print(stderr, "\r\033[K{}", l); };
  bench::StepwiseResult res;
  try {
    res = bench::run_stepwise(driver, so);
  } catch (...) {
    if (so.progress) fmt::print(stderr, "\n");
    // run_stepwise reverted; say so next to whatever failed.
    throw;
  }
  if (so.progress) fmt::print(stderr, "\r\033[K");
  fill_expectations(res, s);
  auto ctx = report_context(s, a);
  for (const auto& n : driver.notes()) ctx.notes.push_back(n);
  if (res.interrupted) {
    fmt::print(stderr, "epyctune bench: interrupted by signal {}; the host is back at stock\n",
               bench::interrupt_signal());
    return interrupted_exit();
  }
  if (!a.chart.empty()) {
    std::ofstream f(a.chart, std::ios::trunc);
    f << bench::to_svg(res, ctx);
    if (!f) throw std::runtime_error("--chart: cannot write " + a.chart);
  }
  if (a.json)
    fmt::print("{}\n", bench::to_json(res, ctx).dump(2));
  else
    fmt::print("{}", bench::to_text(res, ctx));
  return 0;
}

void add_bench_command(CLI::App& app, GlobalOptions& global) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand(
      "bench", "Measure tok/s from stock through each step of the stack, then revert");
  cmd->add_option("--profile", a->profile, "Built-in profile or a TOML file");
  cmd->add_option("--model", a->model, "Target model (GGUF)")->check(CLI::ExistingFile);
  auto* draft = cmd->add_option("--draft,--model-draft", a->draft,
                                "Draft model for step 8 (speculative decoding); also -md")
                    ->check(CLI::ExistingFile);
  cmd->add_option("--lookup", a->lookup, "Step 8 with n-gram lookup drafting (longest n-gram)")
      ->check(CLI::Range(1, 64))
      ->excludes(draft);
  cmd->add_option("--steps", a->steps, "Steps to walk: 1-8, 1,2,6 or bios,numa (default all)");
  cmd->add_option("-n,--tokens", a->tokens, "Tokens generated per run")
      ->check(CLI::Range(4, 100000))
      ->capture_default_str();
  cmd->add_option("--repeat", a->repeat, "Runs per configuration, interleaved")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--prompt", a->prompt, "Prompt for every run");
  add_json_options(cmd, a->json, "JSON (docs/json/bench.md)");
  cmd->add_option("--chart", a->chart, "Write a waterfall of tok/s per step (SVG)")
      ->type_name("FILE.svg");
  cmd->add_flag("--from-stock", a->from_stock, "Revert applied epyctune state first");
  cmd->add_flag("--force", a->force, "Run even when the profile does not match this host");
  cmd->add_flag("--bandwidth", a->bandwidth,
                "Only the read-bandwidth probe, per NUMA node and per L3 domain, pinned");
  cmd->add_option("--bw-mib", a->bw_mib, "Bandwidth probe buffer (MiB)")
      ->check(CLI::Range(16, 1 << 20));
  cmd->footer(
      "Exit codes: 0 done; 1 bad input, profile/host mismatch or state already applied "
      "(nothing changed); 2 the engine or a revert failed (the host is reverted; a failed "
      "revert keeps the journal); 128 + signal when interrupted (reverted).\n" +
      std::string(kExitCodesFooter));
  cmd->callback([a, &global] {
    try {
      global.exit_code = run_bench(*a, global);
    } catch (const bench::Interrupted& e) {
      fmt::print(stderr, "\nepyctune bench: interrupted ({}); the host is back at stock\n",
                 e.what());
      global.exit_code = interrupted_exit();
    } catch (const bench::EngineError& e) {
      fmt::print(stderr, "epyctune bench: {}\nthe host is back at stock\n", e.what());
      global.exit_code = kExitFailed;
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "epyctune bench: {}\n", e.what());
      global.exit_code = kExitError;
    } catch (const profile::ProfileError& e) {
      fmt::print(stderr, "epyctune bench: {}\n", e.what());
      global.exit_code = kExitError;
    } catch (const host::DiscoveryError& e) {
      fmt::print(stderr, "epyctune bench: {}\n", e.what());
      global.exit_code = kExitError;
    } catch (const stack::JournalError& e) {
      fmt::print(stderr, "epyctune bench: {}\n", e.what());
      global.exit_code = kExitError;
    } catch (const std::exception& e) {
      fmt::print(stderr, "epyctune bench: {}\n", e.what());
      global.exit_code = kExitFailed;
    }
  });
}

static Registrar reg(&add_bench_command);

}  // namespace
}  // namespace epyctune::cli
