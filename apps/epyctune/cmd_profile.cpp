// `epyctune profile list | show NAME [--json] | validate FILE... | generate [-o FILE]`
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "apps/epyctune/commands.hpp"
#include "common/cpulist.hpp"
#include "common/text_table.hpp"
#include "host/capabilities.hpp"
#include "host/discover.hpp"
#include "profile/detect.hpp"
#include "profile/generate.hpp"
#include "profile/loader.hpp"
#include "stack/applied.hpp"

namespace epyctune::cli {
namespace {

struct ProfileArgs {
  bool json = false;
  std::string name;
  std::vector<std::string> files;
  // generate
  std::string output, model, model_draft, generated_name;
  bool force = false;
};

// The profile the journal says is applied, "" when none (or the journal
// cannot be read: listing profiles needs no journal, so that is a warning).
std::string active_profile(const host::Sysroot& root) {
  try {
    auto st = stack::read_applied_state(root);
    return st.applied ? st.profile : "";
  } catch (const std::exception& e) {
    spdlog::warn("profile list: cannot tell the active profile: {}", e.what());
    return "";
  }
}

// Built-ins and the sysroot's /etc/epyctune/profiles, marking overrides and,
// like `tuned-adm list`, the active one.
int run_list(const GlobalOptions& g, bool as_json) {
  host::Sysroot root(g.sysroot);
  const std::string active = active_profile(root);
  bool active_listed = false;
  nlohmann::json out = nlohmann::json::array();
  common::TextTable table;
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
      bool is_active = !active.empty() && (p.name == active || l.name == active);
      active_listed |= is_active;
      if (as_json)
        out.push_back({{"name", l.name},
                       {"aliases", p.aliases},
                       {"description", p.description},
                       {"source", l.file.empty() ? "built-in" : l.file},
                       {"overrides_builtin", l.overrides_builtin},
                       {"active", is_active}});
      else
        // The name stays first on its line: scripts read `profile list` by it.
        table.row({{l.name, is_active ? common::Tone::heading : common::Tone::plain},
                   {is_active ? "active" : "", common::Tone::good},
                   p.aliases.empty() ? "" : fmt::format("({})", fmt::join(p.aliases, ", ")),
                   p.description + (l.file.empty() ? "" : fmt::format("  [{}]", from))});
    } catch (const profile::ProfileError& e) {
      ++bad;
      fmt::print(stderr, "{}\n", e.what());
    }
  }
  if (as_json) {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << table.render(common::colour_for(STDOUT_FILENO));
    if (active.empty())
      std::cout << "\nNo profile is applied.\n";
    else
      std::cout << fmt::format("\nActive profile: {}{}\n", active,
                               active_listed ? "" : " (a profile file not listed here)");
  }
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

// A model file's size, which is what a dense model streams per token; only
// GGUF files are taken, so a mistyped path is named instead of measured.
profile::ModelSize model_size(const std::string& path, const char* flag) {
  if (path.empty()) return {};
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw std::invalid_argument(fmt::format("{} {}: {}; give the GGUF file of the model", flag,
                                            path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    throw std::invalid_argument(
        fmt::format("{} {}: not a regular file; give a GGUF file", flag, path));
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  if (!in.read(magic, 4) || std::string_view(magic, 4) != "GGUF")
    throw std::invalid_argument(fmt::format(
        "{} {}: not a GGUF file (no GGUF magic); give the model's .gguf file", flag, path));
  constexpr uint64_t kMaxModel = uint64_t{4096} << 30;  // numa.model_gb's limit
  if (static_cast<uint64_t>(st.st_size) > kMaxModel)
    throw std::invalid_argument(fmt::format("{} {}: larger than 4096 GiB", flag, path));
  return {static_cast<uint64_t>(st.st_size), path};
}

// Written beside the target and renamed over it: a reader never sees half a profile.
void write_whole(const std::string& path, const std::string& text, bool force) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!force && fs::exists(path, ec))
    throw std::invalid_argument(
        fmt::format("{} exists; refusing to overwrite it (use --force)", path));
  if (auto parent = fs::path(path).parent_path(); !parent.empty()) fs::create_directories(parent);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", tmp));
  }
  fs::rename(tmp, path);
}

int run_generate(const GlobalOptions& g, const ProfileArgs& a) {
  try {
    host::Sysroot root(g.sysroot);
    host::DiscoverOptions opt;
    opt.topology_xml = g.topology_xml;
    auto topo = host::discover(root, opt);
    profile::HostFacts facts;
    if (g.topology_xml.empty()) {
      facts.sys = &root;
      facts.capabilities = host::probe_capabilities(root, topo);
      facts.l3cat = facts.capabilities->l3cat;
    }
    profile::GenerateOptions o;
    o.name = a.generated_name;
    o.target = model_size(a.model, "--model");
    o.draft = model_size(a.model_draft, "--model-draft");
    if (!g.topology_xml.empty())
      o.host_args = "--topology " + g.topology_xml;
    else if (g.sysroot != "/")
      o.host_args = "--sysroot " + g.sysroot;
    if (!a.model.empty()) o.host_args += " --model " + a.model;
    if (!a.model_draft.empty()) o.host_args += " --model-draft " + a.model_draft;
    if (o.host_args.rfind(' ', 0) == 0) o.host_args.erase(0, 1);
    auto gen = profile::generate_profile(topo, facts, o);
    if (a.output.empty()) {
      std::cout << gen.text;
      return kExitOk;
    }
    write_whole(a.output, gen.text, a.force);
    fmt::print("{}: profile {} for {} (draft: L3 {}, CPUs {}; verify: CPUs {})\n", a.output,
               gen.profile.name, topo.source, fmt::join(gen.partition.draft.l3, ","),
               common::format_cpulist(gen.partition.draft.cpus),
               common::format_cpulist(gen.partition.verify.cpus));
    return kExitOk;
  } catch (const std::exception& e) {
    fmt::print(stderr, "epyctune profile generate: {}\n", e.what());
    return kExitError;
  }
}

void add_profile_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand("profile", "List, show and validate hardware profiles");
  cmd->require_subcommand(1);
  auto a = std::make_shared<ProfileArgs>();
  auto* list = cmd->add_subcommand(
      "list", "The built-in profiles and /etc/epyctune/profiles/*.toml, which override them");
  add_json_options(list, a->json, "Machine-readable output");
  list->callback([a, &global] { global.exit_code = run_list(global, a->json); });
  auto* show =
      cmd->add_subcommand("show", "A profile after includes, with where each key came from");
  show->add_option("NAME", a->name, "Built-in name or alias (9754, epyc-9754) or a file")
      ->required();
  add_json_options(show, a->json, "Machine-readable output");
  show->callback([a, &global] { global.exit_code = run_show(global, a->name, a->json); });
  auto* val = cmd->add_subcommand(
      "validate", "Check profile files; with --sysroot/--topology also against that host");
  val->add_option("FILE", a->files, "Profile files (or built-in names)")->required();
  val->callback([a, &global] { global.exit_code = run_validate(global, a->files); });
  auto* gen = cmd->add_subcommand(
      "generate",
      "Write a complete, commented profile for this host (or --sysroot DIR / --topology X.xml)");
  gen->add_option("-o,--output", a->output, "Write the profile here (default: standard output)");
  gen->add_option("--model", a->model, "The target's GGUF file: sizes the hugepages");
  gen->add_option("--draft,--model-draft", a->model_draft,
                  "The draft's GGUF file: sizes the hugepages and the draft's L3 domains");
  gen->add_option("--name", a->generated_name,
                  "The profile's name (default: from the part, e.g. epyc-7451-2s-generated)");
  gen->add_flag("--force", a->force, "Overwrite an existing -o FILE");
  gen->callback([a, &global] { global.exit_code = run_generate(global, *a); });
}

static Registrar reg(&add_profile_command);

}  // namespace
}  // namespace epyctune::cli
