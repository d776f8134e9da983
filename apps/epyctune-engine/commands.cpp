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
  // llama.cpp's single-dash long names that the engine's commands accept.
  static constexpr std::pair<std::string_view, std::string_view> kLong[] = {
      {"-md", "--model-draft"},
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

namespace epyctune::engine_cli {

void add_launch_options(CLI::App* cmd, engine::placement::LaunchOptions& o) {
  cmd->add_option("--launch-config", o.launch_config,
                  "Run on this launch plan (TOML, docs/launch-config.md): its CPUs, resctrl "
                  "groups and NUMA nodes replace the engine's own choice")
      ->check(CLI::ExistingFile)
      ->type_name("FILE");
  cmd->add_option("--resctrl-root", o.resctrl_root, "Where the launch config's resctrl groups live")
      ->capture_default_str()
      ->type_name("DIR");
  cmd->add_flag("--map-cpus", o.map_cpus,
                "Map the launch config's CPUs and nodes onto this machine's when they are not "
                "all here (said in the output)");
}

}  // namespace epyctune::engine_cli
