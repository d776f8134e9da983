// `epyctune run --profile NAME --model T.gguf [--draft D.gguf | --lookup N]
//   [--prompt TEXT | --file F] [-n|--tokens N] [--json] [--apply] [--force]`:
// (--draft is also --model-draft and -md, as the engine spells it)
// the engine on this host's applied partition. The tuner starts the
// epyctune-engine binary (found beside this one) with the launch config the
// stack wrote, rather than linking the model code: the tuner stays small and
// root-facing code never runs a GGUF parser, and an engine crash cannot take
// the tuner (or a journal it holds) down with it.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "apps/epyctune/commands.hpp"
#include "bench/engine_process.hpp"
#include "bench/stack_driver.hpp"
#include "host/discover.hpp"
#include "profile/loader.hpp"
#include "stack/apply.hpp"
#include "stack/plan.hpp"
#include "stack/session.hpp"
#include "stack/steps.hpp"

namespace epyctune::cli {
namespace {

namespace fs = std::filesystem;

struct RunArgs {
  std::string profile, model, draft, prompt, file;
  int lookup = 0, n_predict = 128;
  bool json = false, apply = false, force = false;
};

// Steps with a knob that apply would still change, "4 cat, 7 weights".
std::string missing_steps(const stack::Session& s) {
  std::map<std::string, int> missing;
  for (const auto& p : stack::plan_knobs(s.sys, s.knobs))
    if (p.status == stack::PlanStatus::Change) missing[p.knob.step]++;
  std::string out;
  for (const auto& info : stack::all_steps())
    if (missing.count(info.name))
      out += fmt::format("{}{} {} ({} knob{})", out.empty() ? "" : ", ", info.number, info.name,
                         missing[info.name], missing[info.name] == 1 ? "" : "s");
  return out;
}

int run_run(const RunArgs& a, const GlobalOptions& g) {
  if (a.prompt.empty() == a.file.empty())
    throw std::invalid_argument("give the prompt with --prompt TEXT or --file F (one of them)");
  std::string prompt = a.prompt;
  if (!a.file.empty()) {
    std::ifstream f(a.file, std::ios::binary);
    if (!f) throw std::invalid_argument("--file " + a.file + ": cannot read it");
    std::stringstream ss;
    ss << f.rdbuf();
    prompt = ss.str();
  }
  auto s = open_session(g, a.profile, "", a.force);
  if (!s.partition_error.empty())
    throw std::invalid_argument("the profile's partition does not fit this host: " +
                                s.partition_error);
  std::string missing = missing_steps(s);
  if (!missing.empty()) {
    if (!a.apply)
      throw std::invalid_argument(fmt::format(
          "profile {} is not applied on this host: steps {} would still change; run `epyctune "
          "apply --profile {}` first, or pass --apply",
          s.profile.name, missing, a.profile));
    auto r = stack::apply_knobs(s.sys, s.knobs, {false, false, s.profile.name});
    if (r.exit_code != kExitOk) throw std::runtime_error("--apply failed: " + r.error);
    fmt::print(stderr, "epyctune run: applied profile {} (steps {})\n", s.profile.name, missing);
  }
  auto text = s.sys.read(s.profile.spec.launch_config);
  if (!text)
    throw std::invalid_argument(
        fmt::format("{}: no launch config (step 8, spec, writes it); is the profile applied?",
                    s.sys.resolve(s.profile.spec.launch_config).string()));

  std::string tmpl = (fs::temp_directory_path() / "epyctune-run-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary directory");
  const fs::path work = tmpl;
  bench::EngineRunOptions eo;
  eo.model = a.model;
  eo.draft = a.draft;
  eo.lookup = a.lookup;
  const bool speculative = !a.draft.empty() || a.lookup > 0;
  int rc = 0;
  try {
    auto l = bench::engine_launch(s, *text, eo, speculative, work);
    if (!l.note.empty()) fmt::print(stderr, "epyctune run: {}\n", l.note);
    std::vector<std::string> argv{bench::find_engine("/proc/self/exe").string(),
                                  "generate",
                                  "--prompt",
                                  prompt,
                                  "-n",
                                  std::to_string(a.n_predict)};
    if (a.json) argv.push_back("--json");
    argv.insert(argv.end(), l.args.begin(), l.args.end());
    rc = bench::run_process(argv, true).exit_code;
  } catch (...) {
    std::error_code ec;
    fs::remove_all(work, ec);
    throw;
  }
  std::error_code ec;
  fs::remove_all(work, ec);
  if (rc != 0) fmt::print(stderr, "epyctune run: the engine exited with {}\n", rc);
  return rc == 0 ? 0 : kExitFailed;
}

void add_run_command(CLI::App& app, GlobalOptions& global) {
  auto a = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand(
      "run", "Run the engine on this host's applied partition (the launch config of steps 7-8)");
  cmd->add_option("--profile", a->profile, "Built-in profile or a TOML file")->required();
  cmd->add_option("--model", a->model, "Target model (GGUF)")->required()->check(CLI::ExistingFile);
  auto* draft = cmd->add_option("--draft,--model-draft", a->draft, "Draft model (GGUF); also -md")
                    ->check(CLI::ExistingFile);
  cmd->add_option("--lookup", a->lookup, "N-gram lookup drafting, longest n-gram N")
      ->check(CLI::Range(1, 64))
      ->excludes(draft);
  cmd->add_option("--prompt", a->prompt, "Prompt text");
  cmd->add_option("--file", a->file, "Read the prompt from a file");
  cmd->add_option("-n,--tokens", a->n_predict, "Tokens to generate")->capture_default_str();
  add_json_options(cmd, a->json, "The engine's JSON instead of streamed text");
  cmd->add_flag("--apply", a->apply, "Apply the profile first when it is not applied");
  cmd->add_flag("--force", a->force, "Run even when the profile does not match this host");
  cmd->footer(
      "Exit codes: 0 done; 1 bad input, profile not applied (without --apply) or mismatch; "
      "2 the engine or --apply failed.\n" +
      std::string(kExitCodesFooter));
  cmd->callback([a, &global] {
    try {
      global.exit_code = run_run(*a, global);
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "epyctune run: {}\n", e.what());
      global.exit_code = kExitError;
    } catch (const profile::ProfileError& e) {
      fmt::print(stderr, "epyctune run: {}\n", e.what());
      global.exit_code = kExitError;
    } catch (const host::DiscoveryError& e) {
      fmt::print(stderr, "epyctune run: {}\n", e.what());
      global.exit_code = kExitError;
    } catch (const std::exception& e) {
      fmt::print(stderr, "epyctune run: {}\n", e.what());
      global.exit_code = kExitFailed;
    }
  });
}

static Registrar reg(&add_run_command);

}  // namespace
}  // namespace epyctune::cli
