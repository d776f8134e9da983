// The options generate and serve share to load the engine: CPUs, the draft
// model and n-gram lookup, speculative mode, weight memory. Each command adds
// its own --model and context options.
#pragma once

#include <CLI/CLI.hpp>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/field_error.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/serving/engine.hpp"

namespace epyctune::engine_cli {

// The flag of each EngineConfig (and launch option) field: the engine names
// fields, the command line names flags.
inline std::string flag_of(const std::string& field) {
  static const std::map<std::string, std::string> flags = {
      {"model", "--model"},
      {"draft", "--model-draft"},
      {"threads", "--threads"},
      {"n_ctx", "--ctx"},
      {"cpus", "--cpus"},
      {"draft_cpus", "--draft-cpus"},
      {"verify_cpus", "--verify-cpus"},
      {"spec_mode", "--spec-mode"},
      {"lookup", "--lookup"},
      {"lookup_min", "--lookup-min"},
      {"draft_max", "--draft-max"},
      {"draft_min", "--draft-min"},
      {"mmap", "--mmap"},
      {"experts_per_token", "--experts-per-token"},
      {"launch_config", "--launch-config"},
      {"temperature", "--temp"},
      {"top_k", "--top-k"},
      {"top_p", "--top-p"},
      {"min_p", "--min-p"},
      {"numa", "--numa"},
      {"shared_weights", "--shared-weights"},
      {"chat_template", "--chat-template"}};
  auto it = flags.find(field);
  return it == flags.end() ? field : it->second;
}

// An error as the user reads it: a field error starts with its flag.
inline std::string error_text(const std::exception& e) {
  if (const auto* f = dynamic_cast<const common::FieldError*>(&e))
    return flag_of(f->field()) + ": " + f->what();
  return e.what();
}

// A CPU list given as text to `flag`, parsed and checked; errors name the flag.
inline std::vector<int> cpus_flag(const std::string& text, const std::string& flag = "--cpus") {
  try {
    return engine::runtime::parse_cpus(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(flag + ": " + e.what());
  }
}

// A CPU-list flag, parsed and checked against the CPUs this process may use.
inline CLI::Option* add_cpus_option(CLI::App* cmd, const std::string& names,
                                    std::optional<std::vector<int>>& into,
                                    const std::string& help) {
  return cmd->add_option_function<std::string>(
      names,
      [&into, names](const std::string& v) {
        try {
          into = engine::runtime::parse_cpus(v);
        } catch (const std::invalid_argument& e) {
          throw CLI::ValidationError(names.substr(0, names.find(',')), e.what());
        }
      },
      help);
}

inline void add_spec_mode_option(CLI::App* cmd, engine::speculative::ModeRequest& into) {
  using engine::speculative::ModeRequest;
  const std::map<std::string, ModeRequest> modes = {{"partitioned", ModeRequest::partitioned},
                                                    {"shared", ModeRequest::shared},
                                                    {"auto", ModeRequest::automatic}};
  cmd->add_option("--spec-mode", into, "partitioned | shared | auto")
      ->transform(CLI::CheckedTransformer(modes))
      ->default_str("auto");
}

inline void add_engine_options(CLI::App* cmd, engine::serving::EngineConfig& a) {
  auto* th = cmd->add_option("-t,--threads", a.threads,
                             "Threads: the first N allowed CPUs (default: all allowed)");
  add_cpus_option(cmd, "--cpus", a.cpus, "CPUs to run on, e.g. 0-7 (default: all allowed)")
      ->excludes(th);
  // llama.cpp's -md reaches here as --model-draft: main() rewrites it
  // (llama_style_args), since CLI11 reads "-md" as -m d.
  cmd->add_option("--model-draft", a.draft, "Draft model (GGUF, same vocabulary); also -md");
  // Bare --lookup: n-grams of 1..8 over the whole context, which follows the
  // long repeated spans of code editing and quoting.
  cmd->add_option("--lookup", a.lookup,
                  "N-gram lookup drafting over prompt and output: longest n-gram N (0 = off; "
                  "bare --lookup = 8)")
      ->expected(0, 1)
      ->default_str("8");
  cmd->add_option("--lookup-min", a.lookup_min, "Shortest n-gram lookup accepts")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--draft-max",
         [&a](const std::string& v) {
           a.draft_adaptive = v.rfind("adaptive", 0) == 0;
           const std::string n =
               a.draft_adaptive
                   ? v.substr(v.find(':') == std::string::npos ? v.size() : v.find(':') + 1)
                   : v;
           if (a.draft_adaptive && n.empty()) return;  // keep the default longest K
           size_t used = 0;
           int k = -1;
           try {
             k = std::stoi(n, &used);
           } catch (const std::exception&) {
           }
           if (used != n.size() || k < 0 || k > 64)
             throw CLI::ValidationError("--draft-max",
                                        "expected adaptive, adaptive:N or N (0-64), "
                                        "got '" +
                                            v + "'");
           a.draft_max = k;
         },
         "Tokens drafted per verify pass: adaptive (K chosen per round, up to 16), "
         "adaptive:N (up to N), or a fixed N (0 = plain decoding)")
      ->default_str("adaptive");
  cmd->add_flag(
      "--no-cost-cache", [&a](int64_t) { a.cost_cache = false; },
      "Measure this host's pass times afresh instead of reading the cached ones");
  cmd->add_option("--draft-min", a.draft_min,
                  "Shortest draft worth a verify pass, as llama.cpp's --draft-min: a shorter "
                  "one is dropped and the target decodes one token alone (drafts come short "
                  "near the end of generation and when the draft model's context is full)")
      ->capture_default_str();
  add_cpus_option(cmd, "--draft-cpus", a.draft_cpus, "Draft partition (partitioned mode)");
  add_cpus_option(cmd, "--verify-cpus", a.verify_cpus, "Target partition (partitioned mode)");
  add_spec_mode_option(cmd, a.spec_mode);
  cmd->add_option("--experts-per-token", a.experts_per_token,
                  "Experts run per token in a mixture-of-experts target, instead of the "
                  "model's expert_used_count (fewer: faster, further from the full output)");
  cmd->add_flag("--mmap", a.mmap,
                "Use the weights in place from the file mapping (no copy, no NUMA placement, no "
                "repacking)");
}

}  // namespace epyctune::engine_cli
