// `epyctune profile list | show NAME [--json] | validate FILE...`
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

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

// Built-ins and the sysroot's /etc/epyctune/profiles, marking overrides.
int run_list(const GlobalOptions& g, bool as_json) {
  host::Sysroot root(g.sysroot);
  nlohmann::json out = nlohmann::json::array();
  int bad = 0;
  for (const auto& l : profile::list_profile_sources(&root)) {
    std::string from = l.file.empty()        ? "built-in"
                       : l.overrides_builtin ? "overrides the built-in: " + l.file
                                             : l.file;
    if (!l.ignored.empty()) {
      spdlog::warn("{}: ignored: {}", l.file, l.ignored);
      if (as_json) out.push_back({{"name", l.name}, {"file", l.file}, {"ignored", l.ignored}});
      continue;
    }
    try {
      auto p = profile::load_profile(l.name, &root);
      if (as_json)
        out.push_back({{"name", l.name},
                       {"aliases", p.aliases},
                       {"description", p.description},
                       {"source", l.file.empty() ? "built-in" : l.file},
                       {"overrides_builtin", l.overrides_builtin}});
      else
        fmt::print("{:<14} {:<16} {}{}\n", l.name,
                   p.aliases.empty() ? "" : fmt::format("({})", fmt::join(p.aliases, ", ")),
                   p.description, l.file.empty() ? "" : fmt::format("  [{}]", from));
    } catch (const profile::ProfileError& e) {
      ++bad;
      fmt::print(stderr, "{}\n", e.what());
    }
  }
  if (as_json) std::cout << out.dump(2) << "\n";
  return bad ? kExitError : kExitOk;
}

int run_show(const GlobalOptions& g, const std::string& name, bool as_json) {
  try {
    host::Sysroot root(g.sysroot);
    auto p = profile::load_profile(name, &root);
    spdlog::info("profile {} from {}", p.name, p.source_file);
    if (as_json)
      std::cout << profile::profile_to_json(p).dump(2) << "\n";
    else
      std::cout << profile::profile_to_text(p);
    return kExitOk;
  } catch (const profile::ProfileError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return kExitError;
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
    return kExitError;
  }
  int bad = 0;
  host::Sysroot names(g.sysroot);  // names resolve through its overrides, host or not
  for (const auto& f : files) {
    try {
      auto p = profile::load_profile(f, &names);
      if (topo) profile::validate_profile(p, &*topo, g.topology_xml.empty() ? &*root : nullptr);
      fmt::print("{}: ok ({}{})\n", f, p.name, topo ? ", checked against " + topo->source : "");
    } catch (const profile::ProfileError& e) {
      ++bad;
      fmt::print(stderr, "{}\n", e.what());
    }
  }
  return bad ? kExitError : kExitOk;
}

void add_profile_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand("profile", "List, show and validate hardware profiles");
  cmd->require_subcommand(1);
  auto a = std::make_shared<ProfileArgs>();
  auto* list = cmd->add_subcommand(
      "list", "The built-in profiles and /etc/epyctune/profiles/*.toml, which override them");
  list->add_flag("--json", a->json, "Machine-readable output");
  list->callback([a, &global] { global.exit_code = run_list(global, a->json); });
  auto* show =
      cmd->add_subcommand("show", "A profile after includes, with where each key came from");
  show->add_option("NAME", a->name, "Built-in name or alias (9754, epyc-9754) or a file")
      ->required();
  show->add_flag("--json", a->json, "Machine-readable output");
  show->callback([a, &global] { global.exit_code = run_show(global, a->name, a->json); });
  auto* val = cmd->add_subcommand(
      "validate", "Check profile files; with --sysroot/--topology also against that host");
  val->add_option("FILE", a->files, "Profile files (or built-in names)")->required();
  val->callback([a, &global] { global.exit_code = run_validate(global, a->files); });
}

static Registrar reg(&add_profile_command);

}  // namespace
}  // namespace epyctune::cli
