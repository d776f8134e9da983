// `epyctune-mkmodel margins`: how clearly a model's greedy choices win on
// given prompts: the smallest top-1 minus top-2 logit gap over every step and,
// for a mixture-of-experts model, the smallest gap between the k-th and
// (k+1)-th router logit over every token and layer. A reference comparison
// is only as strong as these gaps: a near-tie may go either way in a correct
// engine that rounds differently.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model/llama_model.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "engine/synth/margins.hpp"
#include "tools/epyctune-mkmodel/commands.hpp"

namespace epyctune::mkmodel_tool {
namespace {

namespace eng = epyctune::engine;

struct MarginsArgs {
  std::string model;
  std::vector<std::string> prompts;
  int steps = 64;
  int threads = 0;
  bool json = false;
};

int run_margins(const MarginsArgs& a) {
  if (a.steps < 1) throw std::invalid_argument("-n: must be >= 1");
  eng::runtime::ThreadPool pool(eng::runtime::first_cpus(a.threads), false);
  auto m = eng::LlamaModel::load(a.model, pool);
  const std::vector<std::string> prompts =
      a.prompts.empty() ? std::vector<std::string>{"The quick brown fox"} : a.prompts;
  const eng::MarginReport r = eng::measure_margins(*m, prompts, a.steps);
  const bool moe = !std::isinf(r.min_router_gap);
  if (a.json) {
    std::cout << nlohmann::json{{"model", a.model},
                                {"steps", a.steps},
                                {"prompts", prompts},
                                {"tokens", r.tokens},
                                {"logit_std", r.logit_std},
                                {"min_token_gap", r.min_token_gap},
                                {"min_relative_gap", r.min_relative_gap()},
                                {"min_gap_prompt", r.min_gap_prompt},
                                {"min_gap_step", r.min_gap_step},
                                {"min_router_gap",
                                 moe ? nlohmann::json(r.min_router_gap) : nlohmann::json(nullptr)}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("min top-1 gap %.4f (%.3f x logit std %.3f) at prompt %d step %d", r.min_token_gap,
                r.min_relative_gap(), r.logit_std, r.min_gap_prompt, r.min_gap_step);
    if (moe) std::printf("; min router gap %.4f", r.min_router_gap);
    std::printf("\n");
  }
  return 0;
}

}  // namespace

void add_margins_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<MarginsArgs>();
  auto* cmd = app.add_subcommand(
      "margins", "Greedy decision margins: smallest top-1 gap and router top-k gap on prompts");
  cmd->add_option("--model,-m", args->model, "Model (GGUF)")->required();
  cmd->add_option("--prompt,-p", args->prompts,
                  "Prompt (repeatable; default \"The quick brown fox\"), with BOS as generate");
  cmd->add_option("-n,--n-predict", args->steps, "Greedy steps per prompt")->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "Threads (default: all allowed CPUs)");
  cmd->add_flag("--json", args->json, "Print a JSON report");
  cmd->callback([args, &exit_code] {
    try {
      exit_code = run_margins(*args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "epyctune-mkmodel margins: error: %s\n", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace epyctune::mkmodel_tool
