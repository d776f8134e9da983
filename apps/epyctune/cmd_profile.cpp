// `epyctune profile list | show NAME [--json] | validate FILE...`
#include <fmt/format.h>

#include <iostream>

#include "apps/epyctune/commands.hpp"
#include "host/discover.hpp"
#include "profile/detect.hpp"
#include "profile/loader.hpp"

namespace epyctune::cli {
namespace {

struct ProfileArgs {
  bool json = false;
  std::string name;
  std::vector<std::string> files;
};

int run_list(bool as_json) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& n : profile::list_profiles()) {
    auto p = profile::load_profile(n);
    if (as_json)
      out.push_back({{"name", p.name}, {"aliases", p.aliases}, {"description", p.description}});
    else
      fmt::print("{:<14} {:<16} {}\n", p.name,
                 p.aliases.empty() ? "" : fmt::format("({})", fmt::join(p.aliases, ", ")),
                 p.description);
  }
  if (as_json) std::cout << out.dump(2) << "\n";
  return 0;
}

int run_show(const std::string& name, bool as_json) {
  try {
    auto p = profile::load_profile(name);
    if (as_json)
      std::cout << profile::profile_to_json(p).dump(2) << "\n";
    else
      std::cout << profile::profile_to_text(p);
    return 0;
  } catch (const profile::ProfileError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
}

// Host checks run only when a host was named (--sysroot DIR or --topology):
// a profile for another machine is not wrong because this VM is small.
int run_validate(const GlobalOptions& g, const std::vector<std::string>& files) {
  std::optional<host::Sysroot> root;
  std::optional<host::Topology> topo;
  bool with_host = g.sysroot != "/" || !g.topology_xml.empty();
  try {
    if (with_host) {
      root.emplace(g.sysroot);
      host::DiscoverOptions opt;
      opt.topology_xml = g.topology_xml;
      topo = host::discover(*root, opt);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "epyctune profile validate: {}\n", e.what());
    return 2;
  }
  int bad = 0;
  for (const auto& f : files) {
    try {
      auto p = profile::load_profile(f);
      if (topo) profile::validate_profile(p, &*topo, g.topology_xml.empty() ? &*root : nullptr);
      fmt::print("{}: ok ({}{})\n", f, p.name, topo ? ", checked against " + topo->source : "");
    } catch (const profile::ProfileError& e) {
      ++bad;
      fmt::print(stderr, "{}\n", e.what());
    }
  }
  return bad ? 1 : 0;
}

void add_profile_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand("profile", "List, show and validate hardware profiles");
  cmd->require_subcommand(1);
  auto a = std::make_shared<ProfileArgs>();
  auto* list = cmd->add_subcommand("list", "The built-in profiles");
  list->add_flag("--json", a->json, "Machine-readable output");
  list->callback([a, &global] { global.exit_code = run_list(a->json); });
  auto* show =
      cmd->add_subcommand("show", "A profile after includes, with where each key came from");
  show->add_option("NAME", a->name, "Built-in name or alias (9754, epyc-9754) or a file")
      ->required();
  show->add_flag("--json", a->json, "Machine-readable output");
  show->callback([a, &global] { global.exit_code = run_show(a->name, a->json); });
  auto* val = cmd->add_subcommand(
      "validate", "Check profile files; with --sysroot/--topology also against that host");
  val->add_option("FILE", a->files, "Profile files (or built-in names)")->required();
  val->callback([a, &global] { global.exit_code = run_validate(global, a->files); });
}

static Registrar reg(&add_profile_command);

}  // namespace
}  // namespace epyctune::cli
