// llama.cpp's options where the engine has no concept of its own to map them
// to: the GPU ones, accepted with a note so that a llama.cpp command line
// runs, and the sampler's, shared by generate and chat. Single-dash long
// spellings (-ngl, -fa...) reach these as their long names: main() rewrites
// them (llama_style_args in commands.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "engine/sampling/sampler.hpp"

namespace epyctune::engine_cli {

// Each is one line on stderr, not an error: scripts written for llama.cpp
// pass them, and on a CPU engine they have nothing to do.
inline void add_gpu_noops(CLI::App* cmd) {
  struct Noop {
    const char* names;  // as CLI11 registers them
    const char* shown;  // as the note names it
    int values;         // 0: a flag; 1: one value; -1: an optional value
    const char* why;
  };
  static constexpr Noop kNoops[] = {
      {"--n-gpu-layers,--gpu-layers", "-ngl/--n-gpu-layers", 1, "no GPU to offload layers to"},
      {"--n-gpu-layers-draft,--gpu-layers-draft", "-ngld/--n-gpu-layers-draft", 1,
       "no GPU to offload layers to"},
      {"--flash-attn", "-fa/--flash-attn", -1, "the CPU attention kernels are the engine's own"},
      {"--split-mode", "-sm/--split-mode", 1, "no GPUs to split over"},
      {"--tensor-split", "-ts/--tensor-split", 1, "no GPUs to split over"},
      {"--main-gpu", "-mg/--main-gpu", 1, "no GPU"},
      {"--device", "-dev/--device", 1, "the engine runs on CPUs only"},
      {"--no-kv-offload", "-nkvo/--no-kv-offload", 0, "the KV cache is in CPU memory already"},
      {"--mlock", "--mlock", 0, "the weights are not locked in memory"},
  };
  const std::string group = "llama.cpp GPU options (accepted and ignored)";
  for (const Noop& n : kNoops) {
    auto note = [&n](const std::string& value) {
      std::fprintf(stderr, "epyctune-engine: %s%s%s ignored: %s\n", n.shown,
                   value.empty() ? "" : " ", value.c_str(), n.why);
    };
    const std::string help = std::string(n.shown) + ": ignored, " + n.why;
    if (n.values == 0) {
      cmd->add_flag_callback(
             n.names, [note] { note(""); }, help)
          ->group(group);
    } else {
      cmd->add_option_function<std::string>(n.names, note, help)
          ->expected(n.values < 0 ? 0 : 1, 1)
          ->group(group);
    }
  }
}

// The sampler as llama.cpp spells it; --temp 0 (the default) is greedy.
inline void add_sampling_options(CLI::App* cmd, engine::sampling::SamplerParams& s) {
  cmd->add_option("--temp", s.temperature, "Temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", s.top_k, "Keep the k most likely tokens (0 = off)");
  cmd->add_option("--top-p", s.top_p, "Nucleus mass (1 = off)");
  cmd->add_option("--min-p", s.min_p, "Drop tokens below min-p x the best (0 = off)");
  cmd->add_option("-s,--seed", s.seed, "Sampling seed")->capture_default_str();
}

}  // namespace epyctune::engine_cli
