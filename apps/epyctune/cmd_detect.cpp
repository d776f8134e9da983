// `epyctune detect [--json]`: what this host is, what it supports, which
// profile fits and why. Read-only; works live, on --sysroot and --topology.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "apps/epyctune/commands.hpp"
#include "profile/detect.hpp"

namespace epyctune::cli {
namespace {

int run_detect(const GlobalOptions& g, bool as_json) {
  try {
    spdlog::info("detect: host root {}{}", g.sysroot,
                 g.topology_xml.empty() ? "" : ", topology from " + g.topology_xml);
    host::Sysroot root(g.sysroot);
    host::DiscoverOptions opt;
    opt.topology_xml = g.topology_xml;
    auto report = profile::run_detect(root, opt);
    if (as_json)
      std::cout << profile::detect_to_json(report).dump(2) << "\n";
    else
      std::cout << profile::detect_to_text(report);
    return kExitOk;
  } catch (const std::exception& e) {
    fmt::print(stderr, "epyctune detect: {}\n", e.what());
    return kExitError;
  }
}

void add_detect_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand(
      "detect", "Describe this host (identity, topology, capabilities) and the profile that fits");
  auto as_json = std::make_shared<bool>(false);
  add_json_options(cmd, *as_json, "Machine-readable output (docs/json/detect.md)");
  cmd->callback([as_json, &global] { global.exit_code = run_detect(global, *as_json); });
}

static Registrar reg(&add_detect_command);

}  // namespace
}  // namespace epyctune::cli
