// `epyctune-engine generate`: text in, tokens out, optionally speculative
// (draft model, n-gram lookup, or both) with the draft and the target either
// time-sharing the CPUs or each on its own pinned, NUMA-bound partition.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "apps/epyctune-engine/commands.hpp"
#include "apps/epyctune-engine/launch_options.hpp"
#include "apps/epyctune-engine/progress.hpp"
#include "common/cpulist.hpp"
#include "engine/model/llama_model.hpp"
#include "engine/placement/launch_setup.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/speculative/cpu_plan.hpp"
#include "engine/speculative/speculative.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "host/sysroot.hpp"

namespace epyctune::engine_cli {
namespace {

using Clock = std::chrono::steady_clock;
namespace eng = epyctune::engine;

struct GenerateArgs {
  std::string model, prompt, prompt_file, draft;
  int n_predict = 128;
  int threads = 0;
  int n_ctx = 0;
  eng::sampling::SamplerParams sampler;
  std::string cpus, draft_cpus, verify_cpus;
  int lookup = 0;
  int lookup_min = 1;
  int draft_max = 4;
  int draft_min = 0;
  std::string spec_mode = "auto";
  bool json = false;
  bool mmap = false;
  eng::placement::LaunchOptions launch;
};

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::optional<std::vector<int>> cpus_opt(const std::string& s, const char* flag) {
  if (s.empty()) return std::nullopt;
  try {
    return eng::runtime::parse_cpus(s);
  } catch (const std::invalid_argument& e) {
    // parse_cpus names --cpus; say which flag really was wrong.
    throw std::invalid_argument(std::string(flag) + ": " + e.what());
  }
}

nlohmann::json stats_json(const eng::speculative::SpecStats& st) {
  return {
      {"drafted", st.drafted},
      {"accepted", st.accepted},
      {"acceptance_rate", st.acceptance_rate()},
      {"mean_accepted", st.mean_accepted()},
      {"lookup_drafted", st.lookup_drafted},
      {"lookup_accepted", st.lookup_accepted},
      {"model_drafted", st.model_drafted},
      {"model_accepted", st.model_accepted},
      {"target_passes", st.target_passes},
      {"draft_passes", st.draft_passes},
      {"discarded", st.discarded},
      {"dropped", st.dropped},
      {"draft_s", st.draft_s},
      {"verify_s", st.verify_s},
      {"wait_s", st.wait_s},
  };
}

// The prompt: -p TEXT, -p - (stdin), -f FILE, or stdin when neither is given
// and stdin is not a terminal.
std::string read_prompt(const GenerateArgs& a, bool prompt_given) {
  auto read_all = [](std::istream& in) {
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  if (!a.prompt_file.empty()) {
    std::ifstream in(a.prompt_file, std::ios::binary);
    if (!in) throw std::invalid_argument("--file " + a.prompt_file + ": cannot read it");
    return read_all(in);
  }
  if (prompt_given && a.prompt != "-") return a.prompt;
  if (prompt_given || ::isatty(STDIN_FILENO) != 1) return read_all(std::cin);
  throw std::invalid_argument(
      "no prompt: give -p TEXT, -f FILE, or pipe it on stdin (-p - reads stdin explicitly)");
}

// What run_generate sets up before the first token: CPU plan, pools, models.
struct Session {
  eng::speculative::CpuPlan plan;
  std::unique_ptr<eng::runtime::ThreadPool> verify_pool, draft_pool;
  std::unique_ptr<eng::LlamaModel> target, draft;
  std::unique_ptr<eng::Tokenizer> tok;
  std::unique_ptr<eng::placement::LaunchSetup> launch;  // --launch-config
  double load_s = 0;
  bool partitioned() const { return plan.mode == eng::speculative::SpecMode::partitioned; }
};

eng::speculative::CpuPlan plan_generate_cpus(const GenerateArgs& a) {
  eng::speculative::CpuPlanInput in;
  in.request = eng::speculative::parse_mode_request(a.spec_mode);
  in.has_draft_model = !a.draft.empty() && a.draft_max > 0;
  // --cpus or --threads bound everything; partitions come from the plan.
  in.cpus = !a.cpus.empty() ? *cpus_opt(a.cpus, "--cpus") : eng::runtime::first_cpus(a.threads);
  in.l3_ids = eng::speculative::read_l3_ids("/", in.cpus);
  in.draft_cpus = cpus_opt(a.draft_cpus, "--draft-cpus");
  in.verify_cpus = cpus_opt(a.verify_cpus, "--verify-cpus");
  return eng::speculative::plan_cpus(in);
}

// The threads or memory are not where the launch config puts them.
struct PlacementMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A launch config's partition replaces the engine's own CPU picker.
eng::speculative::CpuPlan plan_from_launch(const GenerateArgs& a,
                                           const eng::placement::LaunchSetup& l) {
  if (!a.cpus.empty() || a.threads > 0 || !a.draft_cpus.empty() || !a.verify_cpus.empty() ||
      a.spec_mode != "auto")
    throw std::invalid_argument(
        "--launch-config sets the CPUs: drop --cpus/--threads/--draft-cpus/--verify-cpus/"
        "--spec-mode");
  eng::speculative::CpuPlan p;
  const std::string from = "launch config " + a.launch.launch_config;
  if (a.draft.empty() || a.draft_max <= 0) {
    p.shared_cpus = l.verify_cpus();
    p.reason = from + ": the target on the verify CPUs";
  } else if (l.draft_cpus() == l.verify_cpus()) {
    p.shared_cpus = l.verify_cpus();
    p.reason = from + ": one CPU here, draft and target alternate on it";
  } else {
    p.mode = eng::speculative::SpecMode::partitioned;
    p.draft_cpus = l.draft_cpus();
    p.verify_cpus = l.verify_cpus();
    p.reason = from + ": draft and target each on their own CPUs";
  }
  return p;
}

// The launch config's [models] fill what the command line leaves out.
void take_launch_models(GenerateArgs& a, const eng::placement::LaunchSetup& l) {
  const auto& p = l.plan();
  if (!p.has_models) return;
  if (a.model.empty()) a.model = p.models.target;
  if (a.draft.empty()) a.draft = p.models.draft;
  if (a.lookup == 0) a.lookup = p.models.lookup;
}

void make_pools(Session& s) {
  const bool planned = s.launch && s.launch->has_partition();
  if (s.partitioned()) {
    s.verify_pool = planned ? s.launch->make_pool("verify")
                            : std::make_unique<eng::runtime::ThreadPool>(s.plan.verify_cpus);
    s.draft_pool = planned ? s.launch->make_pool("draft")
                           : std::make_unique<eng::runtime::ThreadPool>(s.plan.draft_cpus);
  } else {
    s.verify_pool = planned ? s.launch->make_pool("verify")
                            : std::make_unique<eng::runtime::ThreadPool>(s.plan.shared_cpus);
  }
}

void load_session(const GenerateArgs& a, Session& s) {
  if (s.launch && a.mmap)
    throw std::invalid_argument(
        "--mmap keeps the weights where the file is: it cannot follow "
        "the launch config's placement");
  make_pools(s);
  // Partitioned: each model's weights are copied onto the NUMA nodes of its
  // own partition's CPUs, so the draft's traffic stays off the target's memory.
  eng::ModelOptions mo;
  mo.n_ctx = a.n_ctx;
  mo.shared_weights = a.launch.shared_weights;
  if (s.partitioned()) mo.numa = eng::runtime::NumaPolicy::local;
  if (a.mmap) {
    mo.copy_weights = false;
    mo.numa = eng::runtime::NumaPolicy::none;
  }
  eng::ModelOptions mo_draft = mo;
  if (s.launch) {
    s.launch->apply_memory_policy(mo, false);
    s.launch->apply_memory_policy(mo_draft, true);
  }
  ProgressLine line("load");
  const auto t_load = Clock::now();
  if (line.enabled())
    mo.progress = [&](std::string_view stage, uint64_t done, uint64_t total) {
      line.update(std::string(stage) + " " + a.model, done >> 20, total >> 20, "MiB");
    };
  s.target = eng::LlamaModel::load(a.model, *s.verify_pool, mo);
  if (!a.draft.empty() && a.draft_max > 0) {
    if (line.enabled())
      mo_draft.progress = [&](std::string_view stage, uint64_t done, uint64_t total) {
        line.update(std::string(stage) + " " + a.draft, done >> 20, total >> 20, "MiB");
      };
    s.draft =
        eng::LlamaModel::load(a.draft, s.partitioned() ? *s.draft_pool : *s.verify_pool, mo_draft);
  }
  if (s.launch) {
    s.launch->bind_kv(*s.target, false);
    if (s.draft) s.launch->bind_kv(*s.draft, s.partitioned());
  }
  line.finish();
  s.tok = eng::Tokenizer::from_gguf(s.target->file());
  s.load_s = seconds(t_load, Clock::now());
}

struct RunResult {
  std::vector<int32_t> prompt, tokens;
  std::string text;
  std::vector<double> per_token_ms;
  int draft_max = 0;
  bool speculative = false;
};

void print_json(const GenerateArgs& a, const Session& s, const RunResult& r,
                const eng::speculative::SpecStats& st) {
  nlohmann::json j;
  j["model"] = a.model;
  j["draft"] = a.draft.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.draft);
  j["prompt_tokens"] = r.prompt;
  j["tokens"] = r.tokens;
  j["text"] = r.text;
  j["sampler"] = {{"temperature", a.sampler.temperature},
                  {"top_k", a.sampler.top_k},
                  {"top_p", a.sampler.top_p},
                  {"min_p", a.sampler.min_p},
                  {"seed", a.sampler.seed}};
  j["timings"] = {
      {"load_s", s.load_s},
      {"prompt_s", st.prompt_s},
      {"prompt_tok_s", st.prompt_s > 0 ? double(r.prompt.size()) / st.prompt_s : 0.0},
      {"generate_s", st.generate_s},
      {"tok_s", st.tokens_per_second()},
      {"per_token_ms", r.per_token_ms},
  };
  j["spec"] = stats_json(st);
  j["spec"]["enabled"] = r.speculative;
  j["spec"]["mode"] = eng::speculative::spec_mode_name(s.plan.mode);
  j["spec"]["mode_reason"] = s.plan.reason;
  j["spec"]["draft_max"] = r.draft_max;
  j["spec"]["draft_min"] = a.draft_min;
  j["spec"]["lookup"] = a.lookup;
  j["cpus"] = {{"shared", common::format_cpulist(s.plan.shared_cpus)},
               {"draft", common::format_cpulist(s.plan.draft_cpus)},
               {"verify", common::format_cpulist(s.plan.verify_cpus)}};
  j["bytes_per_token"] = s.target->weight_bytes_per_pass(1);
  j["weights"] = eng::placement::weights_json(*s.target);
  j["launch"] = s.launch ? s.launch->report() : nlohmann::json(nullptr);
  // Byte-fallback pieces may split a UTF-8 sequence; JSON strings must be
  // valid UTF-8, so broken bytes become U+FFFD (the ids stay exact).
  std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void print_summary(const Session& s, const RunResult& r, const eng::speculative::SpecStats& st) {
  std::printf("\n");
  if (s.launch)
    for (const auto& line : s.launch->report_lines())
      std::fprintf(stderr, "[launch] %s\n", line.c_str());
  std::fprintf(stderr,
               "[generate] %lld tokens in %.3f s (%.2f tok/s), prompt %zu tokens in %.3f s, "
               "load %.3f s\n",
               static_cast<long long>(st.generated), st.generate_s, st.tokens_per_second(),
               r.prompt.size(), st.prompt_s, s.load_s);
  if (r.speculative)
    std::fprintf(stderr,
                 "[spec] mode %s (%s); drafted %lld accepted %lld (%.1f%%), %.2f accepted per "
                 "target pass, %lld passes, %lld short-draft tokens dropped; draft %.3f s, "
                 "verify %.3f s, wait %.3f s\n",
                 eng::speculative::spec_mode_name(s.plan.mode), s.plan.reason.c_str(),
                 static_cast<long long>(st.drafted), static_cast<long long>(st.accepted),
                 100.0 * st.acceptance_rate(), st.mean_accepted(),
                 static_cast<long long>(st.target_passes), static_cast<long long>(st.dropped),
                 st.draft_s, st.verify_s, st.wait_s);
}

void validate(const GenerateArgs& a) {
  a.sampler.validate();
  if (a.n_predict < 0) throw std::invalid_argument("-n: must be >= 0");
  if (a.lookup < 0) throw std::invalid_argument("--lookup: must be >= 0 (0 = off)");
  if (a.draft_max < 0) throw std::invalid_argument("--draft-max: must be >= 0 (0 = no drafting)");
  if (a.draft_min < 0 || a.draft_min > a.draft_max)
    throw std::invalid_argument("--draft-min: must be between 0 and --draft-max (" +
                                std::to_string(a.draft_max) + ")");
}

int run_generate(const GenerateArgs& args, bool prompt_given) {
  GenerateArgs a = args;
  Session s;
  if (!a.launch.launch_config.empty()) {
    s.launch = std::make_unique<eng::placement::LaunchSetup>(a.launch);
    take_launch_models(a, *s.launch);
  }
  if (a.model.empty())
    throw std::invalid_argument("--model: required (or a launch config with [models] target)");
  validate(a);
  const std::string prompt_text = read_prompt(a, prompt_given);
  s.plan = s.launch && s.launch->has_partition() ? plan_from_launch(a, *s.launch)
                                                 : plan_generate_cpus(a);
  load_session(a, s);

  RunResult r;
  r.speculative = (s.draft || a.lookup > 0) && a.draft_max > 0;
  r.prompt = s.tok->encode(prompt_text, true);
  if (r.prompt.empty())
    throw std::invalid_argument("prompt: encodes to no tokens and the vocabulary adds no BOS");

  eng::speculative::SpecOptions so;
  so.draft_len = r.speculative ? a.draft_max : 0;
  so.draft_min = r.speculative ? a.draft_min : 0;
  r.draft_max = so.draft_len;
  so.lookup = {a.lookup, a.lookup_min};
  so.mode = s.plan.mode;
  so.null_logits_ok = true;  // LlamaModel::forward documents logits == nullptr
  so.max_batch = 64;
  so.is_stop = [&](int32_t t) { return s.tok->is_eog(t); };
  if (s.launch && s.launch->has_partition()) {
    // The threads that drive each pool join its group like the workers did.
    s.launch->record_driver("verify", *s.verify_pool);
    if (s.partitioned())
      so.draft_thread_init = [&s] { s.launch->record_driver("draft", *s.draft_pool); };
    if (auto e = s.launch->thread_errors(); !e.empty())
      throw PlacementMismatch("threads are not where the launch config puts them:\n" + e);
  }
  eng::speculative::Generator gen(*s.target, s.draft.get(), a.sampler, so);

  std::vector<double> token_times;
  const auto t_start = Clock::now();
  r.tokens = gen.generate(r.prompt, a.n_predict, [&](int32_t t) {
    const std::string piece = s.tok->token_to_piece(t);
    r.text += piece;
    token_times.push_back(seconds(t_start, Clock::now()));
    if (!a.json) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  });
  const auto& st = gen.stats();

  // Per-token latency: time between consecutive tokens after the prompt
  // (tokens accepted in one verify pass arrive together).
  double prev = st.prompt_s;
  for (double t : token_times) {
    r.per_token_ms.push_back((t - prev) * 1e3);
    prev = t;
  }
  // Read back where every thread and buffer landed, after they were used.
  const std::string mismatch = s.launch ? s.launch->check(*s.target, s.draft.get()) : "";
  if (a.json)
    print_json(a, s, r, st);
  else
    print_summary(s, r, st);
  if (!mismatch.empty())
    throw PlacementMismatch("threads or memory are not where the launch config puts them:\n" +
                            mismatch);
  return 0;
}

void add_generate_options(CLI::App* cmd, GenerateArgs& a) {
  cmd->add_option("--model,-m", a.model,
                  "Target model (GGUF); required unless the launch config names it");
  cmd->add_option("-n,--n-predict", a.n_predict, "Tokens to generate")->capture_default_str();
  cmd->add_option("--ctx", a.n_ctx, "Context length (0 = the model's)");
  cmd->add_option("--temp", a.sampler.temperature, "Temperature (0 = greedy)")
      ->capture_default_str();
  cmd->add_option("--top-k", a.sampler.top_k, "Keep the k most likely tokens (0 = off)");
  cmd->add_option("--top-p", a.sampler.top_p, "Nucleus mass (1 = off)");
  cmd->add_option("--min-p", a.sampler.min_p, "Drop tokens below min-p x the best (0 = off)");
  cmd->add_option("--seed", a.sampler.seed, "Sampling seed")->capture_default_str();
  auto* th = cmd->add_option("-t,--threads", a.threads,
                             "Threads: the first N allowed CPUs (default: all allowed)");
  cmd->add_option("--cpus", a.cpus, "CPUs to run on, e.g. 0-7 (default: all allowed)")
      ->excludes(th);
  // llama.cpp's -md reaches here as --model-draft: main() rewrites it
  // (llama_style_args), since CLI11 reads "-md" as -m d.
  cmd->add_option("--model-draft", a.draft, "Draft model (GGUF, same vocabulary); also -md");
  cmd->add_option("--lookup", a.lookup, "N-gram lookup drafting: longest n-gram N (0 = off)");
  cmd->add_option("--lookup-min", a.lookup_min, "Shortest n-gram lookup accepts")
      ->capture_default_str();
  cmd->add_option("--draft-max", a.draft_max,
                  "Tokens drafted per verify pass (K; 0 = plain decoding)")
      ->capture_default_str();
  cmd->add_option("--draft-min", a.draft_min,
                  "Shortest draft worth a verify pass, as llama.cpp's --draft-min: a shorter "
                  "one is dropped and the target decodes one token alone (drafts come short "
                  "near the end of generation and when the draft model's context is full)")
      ->capture_default_str();
  cmd->add_option("--draft-cpus", a.draft_cpus, "Draft partition (partitioned mode)");
  cmd->add_option("--verify-cpus", a.verify_cpus, "Target partition (partitioned mode)");
  cmd->add_option("--spec-mode", a.spec_mode, "partitioned | shared | auto")->capture_default_str();
  cmd->add_flag("--json", a.json, "Print one JSON object instead of streaming text");
  cmd->add_flag("--mmap", a.mmap,
                "Use the weights in place from the file mapping (no copy, no NUMA placement, no "
                "repacking)");
}

void add_generate_command(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate text, optionally with speculative decoding");
  auto* prompt = cmd->add_option("--prompt,-p", args->prompt,
                                 "Prompt text; - reads stdin (also read when neither -p nor -f is "
                                 "given and stdin is not a terminal)");
  cmd->add_option("--file,-f", args->prompt_file, "Read the prompt from FILE")
      ->check(CLI::ExistingFile)
      ->excludes(prompt);
  add_generate_options(cmd, *args);
  add_launch_options(cmd, args->launch);
  cmd->callback([args, prompt, &global] {
    try {
      global.exit_code = run_generate(*args, prompt->count() > 0);
    } catch (const PlacementMismatch& e) {
      std::fflush(stdout);
      std::fprintf(stderr, "epyctune-engine generate: %s\n", e.what());
      global.exit_code = kExitPlacement;
    } catch (const std::exception& e) {
      std::fflush(stdout);
      std::fprintf(stderr, "epyctune-engine generate: error: %s\n", e.what());
      global.exit_code = 1;
    }
  });
}

const Registrar reg(&add_generate_command);

}  // namespace
}  // namespace epyctune::engine_cli
