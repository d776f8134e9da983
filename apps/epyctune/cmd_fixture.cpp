// `epyctune fixture create --machine NAME DIR`: a fake host tree
// for tests and rehearsals (see lib/fixture/fixture.hpp for what it holds).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "apps/epyctune/commands.hpp"
#include "fixture/fixture.hpp"

namespace epyctune::cli {
namespace {

struct FixtureArgs {
  std::string machine;
  int nps = 1;
  std::string smt = "on";
  std::string cpufreq_driver = "acpi-cpufreq";
  bool no_resctrl = false;
  bool force = false;
  std::string dir;
};

int run_create(const FixtureArgs& a) {
  namespace fs = std::filesystem;
  fs::path dir(a.dir);
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec) && !a.force) {
    fmt::print(stderr,
               "epyctune: {} is not empty; refusing to write a fixture into it (use --force to "
               "write over it)\n",
               dir.string());
    return kExitError;
  }
  fixture::FixtureOptions o;
  o.machine = a.machine;
  o.nps = a.nps;
  o.smt = a.smt == "on";
  o.cpufreq_driver = a.cpufreq_driver;
  o.resctrl_mounted = !a.no_resctrl;
  try {
    fixture::create_fixture(dir, o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "epyctune: fixture create: {}\n", e.what());
    return kExitError;
  }
  const char* resctrl = !fixture::fixture_has_l3_cat(a.machine) ? "absent: no L3 CAT on this part"
                        : o.resctrl_mounted                     ? "mounted"
                                                                : "not mounted";
  fmt::print("fixture: EPYC {} (NPS{}, SMT {}, {}, resctrl {}) written to {}\n", a.machine, a.nps,
             a.smt, a.cpufreq_driver, resctrl, dir.string());
  fmt::print("use it with: epyctune --sysroot {} detect\n", dir.string());
  return kExitOk;
}

void add_fixture_command(CLI::App& app, GlobalOptions& global) {
  auto* fx = app.add_subcommand("fixture", "Fake host trees for tests and rehearsals");
  fx->require_subcommand(1);
  auto args = std::make_shared<FixtureArgs>();
  auto* create = fx->add_subcommand("create", "Write a faithful fake host tree of an EPYC machine");
  create->add_option("--machine", args->machine, "Which machine")
      ->required()
      ->check(CLI::IsMember(fixture::fixture_machines()));
  create->add_option("--nps", args->nps, "NUMA nodes per socket")
      ->check(CLI::IsMember({1, 2, 4}))
      ->capture_default_str();
  create->add_option("--smt", args->smt, "SMT state")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  create->add_option("--cpufreq-driver", args->cpufreq_driver, "cpufreq driver to imitate")
      ->check(CLI::IsMember({"acpi-cpufreq", "amd-pstate-active", "amd-pstate-passive"}))
      ->capture_default_str();
  create->add_flag("--no-resctrl", args->no_resctrl, "Leave /sys/fs/resctrl unmounted");
  create->add_flag("--force", args->force, "Write into a non-empty DIR");
  create->add_option("DIR", args->dir, "Where to write the tree")->required();
  create->callback([args, &global] { global.exit_code = run_create(*args); });
}

static Registrar reg(&add_fixture_command);

}  // namespace
}  // namespace epyctune::cli
