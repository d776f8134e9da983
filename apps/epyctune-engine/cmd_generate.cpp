// `epyctune-engine generate`: text in, tokens out, optionally speculative
// (draft model, n-gram lookup, or both) with the draft and the target either
// time-sharing the CPUs or each on its own pinned, NUMA-bound partition.
// Loading and decoding are the serving library's Engine, shared with `serve`.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/epyctune-engine/commands.hpp"
#include "apps/epyctune-engine/engine_options.hpp"
#include "apps/epyctune-engine/launch_options.hpp"
#include "apps/epyctune-engine/llama_flags.hpp"
#include "common/cpulist.hpp"
#include "engine/chat/chat_template.hpp"
#include "engine/placement/launch_setup.hpp"
#include "engine/serving/engine.hpp"

namespace epyctune::engine_cli {
namespace {

using Clock = std::chrono::steady_clock;
namespace eng = epyctune::engine;

struct GenerateArgs {
  std::string prompt, prompt_file;
  int n_predict = 128;
  eng::sampling::SamplerParams sampler;
  bool json = false;
  eng::serving::EngineConfig engine;
  bool chat = false;  // --chat: the prompt is a user message in the model's chat format
  std::string system, chat_template;
};

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
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
      {"every_cpu_passes", st.every_cpu_passes},
      {"shared_rounds", st.shared_rounds},
      {"layout_switches", st.layout_switches},
      {"draft_s", st.draft_s},
      {"verify_s", st.verify_s},
      {"wait_s", st.wait_s},
      {"k_per_round", st.k_trace},
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

struct RunResult {
  std::vector<int32_t> prompt, tokens;
  std::string text;
  std::vector<double> per_token_ms;
};

void print_json(const GenerateArgs& a, const eng::serving::Engine& e, const RunResult& r,
                const eng::speculative::SpecStats& st) {
  const auto& c = e.config();
  nlohmann::json j;
  j["model"] = c.model;
  j["draft"] = c.draft.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.draft);
  j["prompt_tokens"] = r.prompt;
  j["tokens"] = r.tokens;
  j["text"] = r.text;
  j["sampler"] = {{"temperature", a.sampler.temperature},
                  {"top_k", a.sampler.top_k},
                  {"top_p", a.sampler.top_p},
                  {"min_p", a.sampler.min_p},
                  {"seed", a.sampler.seed}};
  j["timings"] = {
      {"load_s", e.load_seconds()},
      {"cost_model_s", e.cost_seconds()},
      {"prompt_s", st.prompt_s},
      {"prompt_tok_s", st.prompt_s > 0 ? double(r.prompt.size()) / st.prompt_s : 0.0},
      {"generate_s", st.generate_s},
      {"tok_s", st.tokens_per_second()},
      {"per_token_ms", r.per_token_ms},
  };
  const auto& plan = e.plan();
  j["spec"] = stats_json(st);
  j["spec"]["enabled"] = e.speculative();
  j["spec"]["mode"] = eng::speculative::spec_mode_name(e.mode());
  j["spec"]["mode_reason"] = plan.reason;
  j["spec"]["draft_max"] = e.draft_max();
  j["spec"]["draft_min"] = c.draft_min;
  j["spec"]["adaptive"] = c.draft_adaptive;
  j["spec"]["cost_model"] = e.cost_note();
  j["spec"]["lookup"] = c.lookup;
  const bool part = plan.partitioned();
  j["cpus"] = {{"shared", part ? "" : common::format_cpulist(plan.verify.cpus)},
               {"draft", part ? common::format_cpulist(plan.draft.cpus) : ""},
               {"verify", part ? common::format_cpulist(plan.verify.cpus) : ""}};
  j["bytes_per_token"] = e.target().weight_bytes_per_pass(1);
  j["weights"] = eng::placement::weights_json(e.target());
  j["launch"] = e.launch() ? e.launch()->report() : nlohmann::json(nullptr);
  // Byte-fallback pieces may split a UTF-8 sequence; JSON strings must be
  // valid UTF-8, so broken bytes become U+FFFD (the ids stay exact).
  std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void print_summary(const eng::serving::Engine& e, const RunResult& r,
                   const eng::speculative::SpecStats& st) {
  std::printf("\n");
  if (e.launch())
    for (const auto& line : e.launch()->report_lines())
      std::fprintf(stderr, "[launch] %s\n", line.c_str());
  std::fprintf(stderr,
               "[generate] %lld tokens in %.3f s (%.2f tok/s), prompt %zu tokens in %.3f s, "
               "load %.3f s (cost model %.3f s)\n",
               static_cast<long long>(st.generated), st.generate_s, st.tokens_per_second(),
               r.prompt.size(), st.prompt_s, e.load_seconds(), e.cost_seconds());
  if (!e.speculative()) return;
  // Partitioned: how many passes ran on both sides' CPUs, drafting paused or
  // time-shared there (auto's layout choice), and how often the layout moved.
  std::string handback;
  if (e.partitioned() && st.shared_rounds + st.layout_switches == 0)
    handback = " (" + std::to_string(st.every_cpu_passes) + " on every CPU, drafting paused)";
  else if (e.partitioned())
    handback = fmt::format(
        " ({} on every CPU: {} drafting time-shared, the rest plain; layout moved {} times)",
        st.every_cpu_passes, st.shared_rounds, st.layout_switches);
  std::fprintf(stderr,
               "[spec] mode %s (%s); drafted %lld accepted %lld (%.1f%%), %.2f accepted per "
               "target pass, %lld passes%s, %lld short-draft tokens dropped; draft %.3f s, "
               "verify %.3f s, wait %.3f s\n",
               eng::speculative::spec_mode_name(e.mode()), e.plan().reason.c_str(),
               static_cast<long long>(st.drafted), static_cast<long long>(st.accepted),
               100.0 * st.acceptance_rate(), st.mean_accepted(),
               static_cast<long long>(st.target_passes), handback.c_str(),
               static_cast<long long>(st.dropped), st.draft_s, st.verify_s, st.wait_s);
}

int run_generate(const GenerateArgs& a, bool prompt_given) {
  a.sampler.validate();
  if (a.n_predict < -1)
    throw std::invalid_argument("-n/--n-predict: must be >= 0, or -1 (until the model ends)");
  eng::serving::Engine e(a.engine);
  const std::string prompt_text = read_prompt(a, prompt_given);
  load_engine(e);

  RunResult r;
  r.prompt = a.chat
                 ? eng::chat::prompt_tokens(e.tokenizer(), a.system, prompt_text, a.chat_template)
                 : e.tokenizer().encode(prompt_text, true);
  if (r.prompt.empty())
    throw std::invalid_argument("prompt: encodes to no tokens and the vocabulary adds no BOS");
  check_fits_context(r.prompt.size(), e);
  e.attach_driver();

  // -1, as llama.cpp: until an end-of-generation token or a full context.
  const int n_predict = a.n_predict < 0 ? e.n_ctx() : a.n_predict;
  std::vector<double> token_times;
  const auto t_start = Clock::now();
  const auto done =
      e.generate(r.prompt, n_predict, a.sampler, [&](int32_t, const std::string& piece) {
        r.text += piece;
        token_times.push_back(seconds(t_start, Clock::now()));
        if (!a.json) {
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
        }
        return true;
      });
  r.tokens = done.tokens;
  const auto& st = done.stats;

  // Per-token latency: time between consecutive tokens after the prompt
  // (tokens accepted in one verify pass arrive together).
  double prev = st.prompt_s;
  for (double t : token_times) {
    r.per_token_ms.push_back((t - prev) * 1e3);
    prev = t;
  }
  // Read back where every thread and buffer landed, after they were used.
  const std::string mismatch = e.check_placement();
  if (a.json)
    print_json(a, e, r, st);
  else
    print_summary(e, r, st);
  if (!mismatch.empty())
    throw eng::serving::PlacementMismatch(
        "threads or memory are not where the launch config puts them:\n" + mismatch);
  return 0;
}

void add_generate_options(CLI::App* cmd, GenerateArgs& g) {
  cmd->add_option("-n,--n-predict,--predict", g.n_predict,
                  "Tokens to generate (-1: until the model ends or the context is full)")
      ->capture_default_str();
  add_engine_options(cmd, g.engine);
  add_spec_options(cmd, g.engine);
  add_sampling_options(cmd, g.sampler);
  cmd->add_flag("--json", g.json, "Print one JSON object instead of streaming text");
  // llama-cli's conversation mode is a command of its own here.
  cmd->add_flag_callback("--conversation",
                         [] {
                           throw CLI::ValidationError(
                               "-cnv/--conversation",
                               "an interactive chat is its own command: epyctune-engine chat "
                               "-m MODEL");
                         })
      ->group("");
  cmd->add_flag("--no-conversation")->group("");  // llama.cpp's -no-cnv: generate never is one
  add_gpu_noops(cmd);
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
  cmd->add_flag("--chat", args->chat,
                "Wrap the prompt as a user turn in the model's chat template");
  cmd->add_option("--system-prompt,--system", args->system, "System message for --chat; also -sys");
  cmd->add_option("--chat-template", args->chat_template,
                  "Chat format for --chat when the model's is unrecognised: chatml, llama3, "
                  "deepseek, harmony");
  add_launch_options(cmd, args->engine.launch);
  cmd->callback([args, prompt, &global] {
    try {
      global.exit_code = run_generate(*args, prompt->count() > 0);
    } catch (const eng::serving::PlacementMismatch& e) {
      std::fflush(stdout);
      std::fprintf(stderr, "epyctune-engine generate: %s\n", e.what());
      global.exit_code = kExitPlacement;
    } catch (const std::exception& e) {
      std::fflush(stdout);
      std::fprintf(stderr, "epyctune-engine generate: error: %s\n", error_text(e).c_str());
      global.exit_code = 1;
    }
  });
}

const Registrar reg(&add_generate_command);

}  // namespace
}  // namespace epyctune::engine_cli
