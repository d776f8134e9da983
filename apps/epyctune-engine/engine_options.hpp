// The options generate, serve and chat share to load the engine: the model,
// context, CPUs, weight memory; and those generate and serve add for
// speculative decoding (the draft model and n-gram lookup, the partition).
// Names are llama.cpp's where it has the concept (-c, -t, -td, -md, -b,
// --numa, --no-mmap), with the engine's older spellings kept as aliases.
#pragma once

#include <CLI/CLI.hpp>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/epyctune-engine/progress.hpp"
#include "common/field_error.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/runtime/weight_memory.hpp"
#include "engine/serving/engine.hpp"

namespace epyctune::engine_cli {

// The flag of each EngineConfig (and launch option) field: the engine names
// fields, the command line names flags.
inline std::string flag_of(const std::string& field) {
  static const std::map<std::string, std::string> flags = {
      {"model", "--model"},
      {"draft", "--model-draft"},
      {"threads", "--threads"},
      {"draft_threads", "--threads-draft"},
      {"n_ctx", "--ctx-size"},
      {"batch", "--batch-size"},
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
      {"seed", "--seed"},
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

// A prompt that does not fit the context, said with the flag that fixes it
// (the engine's own check names no flag).
inline void check_fits_context(size_t tokens, const engine::serving::Engine& e,
                               const std::string& what = "prompt") {
  if (tokens <= static_cast<size_t>(e.n_ctx())) return;
  throw std::invalid_argument(what + " of " + std::to_string(tokens) +
                              " tokens exceeds the context of " + std::to_string(e.n_ctx()) +
                              ": -c/--ctx-size N sets it (0: the model's own, " +
                              std::to_string(e.target().config().n_ctx) + ")");
}

// Engine::load with its progress on a terminal.
inline void load_engine(engine::serving::Engine& e) {
  ProgressLine line("load");
  engine::serving::LoadProgress progress;
  if (line.enabled())
    progress = [&](const std::string& path, std::string_view stage, uint64_t done, uint64_t total) {
      line.update(std::string(stage) + " " + path, done >> 20, total >> 20, "MiB");
    };
  e.load(progress);
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

// --numa's value: llama.cpp's strategies, or the engine's own placements.
struct NumaFlag {
  std::optional<engine::runtime::NumaPolicy> policy;
  bool isolate = false;
};
inline NumaFlag parse_numa_flag(const std::string& v) {
  using engine::runtime::NumaPolicy;
  if (v == "isolate") return {std::nullopt, true};
  if (v == "distribute") return {NumaPolicy::interleave, false};
  if (v == "numactl") return {NumaPolicy::none, false};  // the policy numactl gave the process
  try {
    return {engine::runtime::parse_numa_policy(v), false};
  } catch (const std::exception&) {
    throw std::invalid_argument(
        "expected distribute, isolate or numactl (llama.cpp's), or none, "
        "interleave, split or local; got '" +
        v + "'");
  }
}
// A CLI11 check of --numa's value: "" when it is one.
inline std::string numa_flag_error(const std::string& v) {
  try {
    parse_numa_flag(v);
    return "";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}
inline constexpr const char* kNumaHelp =
    "Weights on NUMA nodes: distribute (interleaved over every node), isolate (only the CPUs of "
    "the node the engine starts on, weights there), numactl (the CPUs and memory policy numactl "
    "gave the process), or none, interleave, split (layers in groups over the nodes), local (the "
    "nodes of the CPUs)";

// --kv-type, and llama.cpp's -ctk/-ctv (--cache-type-k/-v, rewritten by
// llama_style_args): keys and values share one type here, so two different
// values are an error.
inline void add_kv_type_options(CLI::App* cmd, engine::GgmlType& into) {
  using engine::GgmlType;
  auto given = std::make_shared<std::optional<GgmlType>>();
  auto set = [&into, given](const std::string& flag) {
    return [&into, given, flag](const std::string& v) {
      const std::map<std::string, GgmlType> types = {
          {"f16", GgmlType::F16}, {"f32", GgmlType::F32}, {"q8_0", GgmlType::Q8_0}};
      auto it = types.find(v);
      if (it == types.end())
        throw CLI::ValidationError(flag, "expected f16, f32 or q8_0, got '" + v + "'");
      if (*given && **given != it->second)
        throw CLI::ValidationError(flag, "keys and values share one KV type here: give one");
      *given = it->second;
      into = it->second;
    };
  };
  cmd->add_option_function<std::string>(
         "--kv-type", set("--kv-type"),
         "KV cache type: f16, f32 or q8_0 (8-bit, one scale per 32 values: about half f16's "
         "bytes per position)")
      ->default_str("f16");
  cmd->add_option_function<std::string>("--cache-type-k", set("--cache-type-k"),
                                        "As --kv-type (llama.cpp's -ctk)");
  cmd->add_option_function<std::string>("--cache-type-v", set("--cache-type-v"),
                                        "As --kv-type (llama.cpp's -ctv)");
}

// The target, its context and the CPUs and memory it runs on.
inline void add_engine_options(CLI::App* cmd, engine::serving::EngineConfig& a) {
  cmd->add_option("-m,--model", a.model,
                  "Target model (GGUF); required unless the launch config names it");
  cmd->add_option("-c,--ctx-size,--ctx", a.n_ctx,
                  "Context length of each sequence (0 = the model's)");
  auto* th = cmd->add_option("-t,--threads", a.threads,
                             "Threads: the first N allowed CPUs (default: all allowed)");
  add_cpus_option(cmd, "--cpus", a.cpus, "CPUs to run on, e.g. 0-7 (default: all allowed)")
      ->excludes(th);
  cmd->add_option("-b,--batch-size", a.batch,
                  "Tokens per forward pass over a prompt (and the largest pass's scratch)")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--numa",
         [&a](const std::string& v) {
           const NumaFlag f = parse_numa_flag(v);
           a.numa = f.policy;
           a.numa_isolate = f.isolate;
         },
         kNumaHelp + std::string(" (default: each partition's nodes when partitioned, else "
                                 "first touch)"))
      ->check(numa_flag_error);
  cmd->add_flag("--mmap,!--no-mmap", a.mmap,
                "Use the weights in place from the file mapping (no copy, no NUMA placement, no "
                "repacking); --no-mmap: copy them (the default)");
  cmd->add_option("--experts-per-token", a.experts_per_token,
                  "Experts run per token in a mixture-of-experts target, instead of the "
                  "model's expert_used_count (fewer: faster, further from the full output)");
  add_kv_type_options(cmd, a.kv_type);
}

// --draft-max: adaptive, adaptive:N or N.
inline void set_draft_max(engine::serving::EngineConfig& a, const std::string& v) {
  a.draft_adaptive = v.rfind("adaptive", 0) == 0;
  const std::string n =
      a.draft_adaptive ? v.substr(v.find(':') == std::string::npos ? v.size() : v.find(':') + 1)
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
                               "expected adaptive, adaptive:N or N (0-64), got '" + v + "'");
  a.draft_max = k;
}

// Speculative decoding: what drafts, how much, and on which CPUs.
inline void add_spec_options(CLI::App* cmd, engine::serving::EngineConfig& a) {
  // llama.cpp's -md and -td reach here as --model-draft and --threads-draft:
  // main() rewrites them (llama_style_args), since CLI11 reads "-md" as -m d.
  cmd->add_option("--model-draft", a.draft, "Draft model (GGUF, same vocabulary); also -md");
  cmd->add_option("--threads-draft", a.draft_threads,
                  "The draft's threads, also -td: the last N CPUs draft and the target keeps "
                  "the rest (partitioned mode)");
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
         "--draft-max", [&a](const std::string& v) { set_draft_max(a, v); },
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
}

}  // namespace epyctune::engine_cli
