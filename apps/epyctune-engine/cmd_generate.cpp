// `epyctune-engine generate`: text in, tokens out, optionally speculative
// (draft model, n-gram lookup, or both) with the draft and the target either
// time-sharing the CPUs or each on its own pinned, NUMA-bound partition.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "apps/epyctune-engine/commands.hpp"
#include "common/cpulist.hpp"
#include "engine/model/llama_model.hpp"
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
  std::string model, prompt, draft;
  int n_predict = 128;
  int n_ctx = 0;
  eng::sampling::SamplerParams sampler;
  std::string cpus, draft_cpus, verify_cpus;
  int lookup = 0;
  int lookup_min = 1;
  int draft_len = 4;
  std::string spec_mode = "auto";
  bool json = false;
  bool mmap = false;
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
      {"draft_s", st.draft_s},
      {"verify_s", st.verify_s},
      {"wait_s", st.wait_s},
  };
}

int run_generate(const GenerateArgs& a) {
  a.sampler.validate();
  if (a.n_predict < 0) throw std::invalid_argument("-n: must be >= 0");
  if (a.lookup < 0) throw std::invalid_argument("--lookup: must be >= 0 (0 = off)");
  const bool speculative = (!a.draft.empty() || a.lookup > 0) && a.draft_len > 0;

  // CPUs: --cpus bounds everything; partitions come from the plan.
  eng::speculative::CpuPlanInput in;
  in.request = eng::speculative::parse_mode_request(a.spec_mode);
  in.has_draft_model = !a.draft.empty() && a.draft_len > 0;
  in.cpus = a.cpus.empty() ? eng::runtime::allowed_cpus() : *cpus_opt(a.cpus, "--cpus");
  in.l3_ids = eng::speculative::read_l3_ids("/", in.cpus);
  in.draft_cpus = cpus_opt(a.draft_cpus, "--draft-cpus");
  in.verify_cpus = cpus_opt(a.verify_cpus, "--verify-cpus");
  const eng::speculative::CpuPlan plan = eng::speculative::plan_cpus(in);
  const bool partitioned = plan.mode == eng::speculative::SpecMode::partitioned;

  std::unique_ptr<eng::runtime::ThreadPool> verify_pool, draft_pool;
  if (partitioned) {
    verify_pool = std::make_unique<eng::runtime::ThreadPool>(plan.verify_cpus);
    draft_pool = std::make_unique<eng::runtime::ThreadPool>(plan.draft_cpus);
  } else {
    verify_pool = std::make_unique<eng::runtime::ThreadPool>(plan.shared_cpus);
  }

  // Partitioned: each model's weights are copied onto the NUMA nodes of its
  // own partition's CPUs, so the draft's traffic stays off the target's memory.
  eng::ModelOptions mo;
  mo.n_ctx = a.n_ctx;
  if (partitioned) mo.numa = eng::runtime::NumaPolicy::local;
  if (a.mmap) {
    mo.copy_weights = false;
    mo.numa = eng::runtime::NumaPolicy::none;
  }
  const auto t_load = Clock::now();
  auto target = eng::LlamaModel::load(a.model, *verify_pool, mo);
  std::unique_ptr<eng::LlamaModel> draft;
  if (in.has_draft_model)
    draft = eng::LlamaModel::load(a.draft, partitioned ? *draft_pool : *verify_pool, mo);
  auto tok = eng::Tokenizer::from_gguf(target->file());
  const double load_s = seconds(t_load, Clock::now());

  const std::vector<int32_t> prompt = tok->encode(a.prompt, true);
  if (prompt.empty())
    throw std::invalid_argument("--prompt: encodes to no tokens and the vocabulary adds no BOS");

  eng::speculative::SpecOptions so;
  so.draft_len = speculative ? a.draft_len : 0;
  so.lookup = {a.lookup, a.lookup_min};
  so.mode = plan.mode;
  so.null_logits_ok = true;  // LlamaModel::forward documents logits == nullptr
  so.max_batch = 64;
  so.is_stop = [&](int32_t t) { return tok->is_eog(t); };
  eng::speculative::Generator gen(*target, draft.get(), a.sampler, so);

  std::string text;
  std::vector<double> token_times;
  const auto t_start = Clock::now();
  const auto out = gen.generate(prompt, a.n_predict, [&](int32_t t) {
    const std::string piece = tok->token_to_piece(t);
    text += piece;
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
  std::vector<double> per_token_ms;
  double prev = st.prompt_s;
  for (double t : token_times) {
    per_token_ms.push_back((t - prev) * 1e3);
    prev = t;
  }
  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["draft"] = a.draft.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.draft);
    j["prompt_tokens"] = prompt;
    j["tokens"] = out;
    j["text"] = text;
    j["sampler"] = {{"temperature", a.sampler.temperature},
                    {"top_k", a.sampler.top_k},
                    {"top_p", a.sampler.top_p},
                    {"min_p", a.sampler.min_p},
                    {"seed", a.sampler.seed}};
    j["timings"] = {
        {"load_s", load_s},
        {"prompt_s", st.prompt_s},
        {"prompt_tok_s", st.prompt_s > 0 ? double(prompt.size()) / st.prompt_s : 0.0},
        {"generate_s", st.generate_s},
        {"tok_s", st.tokens_per_second()},
        {"per_token_ms", per_token_ms},
    };
    j["spec"] = stats_json(st);
    j["spec"]["enabled"] = speculative;
    j["spec"]["mode"] = eng::speculative::spec_mode_name(plan.mode);
    j["spec"]["mode_reason"] = plan.reason;
    j["spec"]["draft_len"] = so.draft_len;
    j["spec"]["lookup"] = a.lookup;
    j["cpus"] = {{"shared", common::format_cpulist(plan.shared_cpus)},
                 {"draft", common::format_cpulist(plan.draft_cpus)},
                 {"verify", common::format_cpulist(plan.verify_cpus)}};
    // Byte-fallback pieces may split a UTF-8 sequence; JSON strings must be
    // valid UTF-8, so broken bytes become U+FFFD (the ids stay exact).
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::printf("\n");
    std::fprintf(stderr,
                 "[generate] %lld tokens in %.3f s (%.2f tok/s), prompt %zu tokens in %.3f s, "
                 "load %.3f s\n",
                 static_cast<long long>(st.generated), st.generate_s, st.tokens_per_second(),
                 prompt.size(), st.prompt_s, load_s);
    if (speculative)
      std::fprintf(stderr,
                   "[spec] mode %s (%s); drafted %lld accepted %lld (%.1f%%), %.2f accepted per "
                   "target pass, %lld passes; draft %.3f s, verify %.3f s, wait %.3f s\n",
                   eng::speculative::spec_mode_name(plan.mode), plan.reason.c_str(),
                   static_cast<long long>(st.drafted), static_cast<long long>(st.accepted),
                   100.0 * st.acceptance_rate(), st.mean_accepted(),
                   static_cast<long long>(st.target_passes), st.draft_s, st.verify_s, st.wait_s);
  }
  return 0;
}

void add_generate_command(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate text, optionally with speculative decoding");
  cmd->add_option("--model,-m", args->model, "Target model (GGUF)")->required();
  cmd->add_option("--prompt,-p", args->prompt, "Prompt text")->required();
  cmd->add_option("-n,--n-predict", args->n_predict, "Tokens to generate")->capture_default_str();
  cmd->add_option("--ctx", args->n_ctx, "Context length (0 = the model's)");
  cmd->add_option("--temp", args->sampler.temperature, "Temperature (0 = greedy)")
      ->capture_default_str();
  cmd->add_option("--top-k", args->sampler.top_k, "Keep the k most likely tokens (0 = off)");
  cmd->add_option("--top-p", args->sampler.top_p, "Nucleus mass (1 = off)");
  cmd->add_option("--min-p", args->sampler.min_p, "Drop tokens below min-p x the best (0 = off)");
  cmd->add_option("--seed", args->sampler.seed, "Sampling seed")->capture_default_str();
  cmd->add_option("--cpus", args->cpus, "CPUs to run on (default: all allowed)");
  cmd->add_option("--draft", args->draft, "Draft model (GGUF, same vocabulary)");
  cmd->add_option("--lookup", args->lookup, "N-gram lookup drafting: longest n-gram N (0 = off)");
  cmd->add_option("--lookup-min", args->lookup_min, "Shortest n-gram lookup accepts")
      ->capture_default_str();
  cmd->add_option("--draft-len,-k", args->draft_len, "Draft tokens per verify pass (K)")
      ->capture_default_str();
  cmd->add_option("--draft-cpus", args->draft_cpus, "Draft partition (partitioned mode)");
  cmd->add_option("--verify-cpus", args->verify_cpus, "Target partition (partitioned mode)");
  cmd->add_option("--spec-mode", args->spec_mode, "partitioned | shared | auto")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object instead of streaming text");
  cmd->add_flag("--mmap", args->mmap,
                "Use the weights in place from the file mapping (no copy, no NUMA placement, no "
                "repacking)");
  cmd->callback([args, &global] {
    try {
      global.exit_code = run_generate(*args);
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
