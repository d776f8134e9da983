#include "apps/epyctune-engine/commands.hpp"

#include <algorithm>
#include <string_view>
#include <utility>

namespace epyctune::engine_cli {
std::vector<RegisterFn>& registry() {
  static std::vector<RegisterFn> fns;
  return fns;
}

std::vector<std::string> llama_style_args(int argc, const char* const* argv) {
  // llama.cpp's single-dash long names that the engine's commands accept,
  // and the long name each registers. One table for every command: a name
  // a command lacks is CLI11's usual "not expected" error under its long name.
  static constexpr std::pair<std::string_view, std::string_view> kLong[] = {
      {"-md", "--model-draft"},
      {"-td", "--threads-draft"},
      {"-np", "--parallel"},
      {"-ctk", "--cache-type-k"},
      {"-ctv", "--cache-type-v"},
      {"-sys", "--system-prompt"},
      {"-cnv", "--conversation"},
      {"-no-cnv", "--no-conversation"},
      // GPU options, accepted with a note (llama_flags.hpp).
      {"-ngl", "--n-gpu-layers"},
      {"-ngld", "--n-gpu-layers-draft"},
      {"-fa", "--flash-attn"},
      {"-sm", "--split-mode"},
      {"-ts", "--tensor-split"},
      {"-mg", "--main-gpu"},
      {"-dev", "--device"},
      {"-nkvo", "--no-kv-offload"},
  };
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {  // everything after is positional
      for (; i < argc; ++i) args.emplace_back(argv[i]);
      break;
    }
    for (const auto& [from, to] : kLong) {
      if (a == from)
        a = to;
      else if (a.size() > from.size() && a.starts_with(from) && a[from.size()] == '=')
        a = std::string(to) + a.substr(from.size());
    }
    args.push_back(std::move(a));
  }
  std::reverse(args.begin(), args.end());
  return args;
}

}  // namespace epyctune::engine_cli
