// --launch-config FILE, --resctrl-root DIR, --map-cpus: the options generate
// and bench share to run on a launch plan (docs/launch-config.md); and
// --shared-weights DIR, the store several instances map their weights from.
#pragma once

#include <CLI/CLI.hpp>

#include "engine/placement/launch_setup.hpp"

namespace epyctune::engine_cli {

// Exit code when threads or memory are not where the launch config says.
inline constexpr int kExitPlacement = 3;

inline void add_launch_options(CLI::App* cmd, engine::placement::LaunchOptions& o) {
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
  cmd->add_option("--shared-weights", o.shared_weights,
                  "Map the prepared weights read-only from a store file in DIR (built there "
                  "first, under a lock, when absent or unusable), shared by every instance of "
                  "the same model, layout and NUMA nodes; DIR on /dev/shm or a hugetlbfs "
                  "mount, owned by this user or root (docs/launch-config.md)")
      ->type_name("DIR");
}

}  // namespace epyctune::engine_cli
