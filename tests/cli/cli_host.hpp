// A fixture host for the CLI suites, and `epyctune` run against it.
#pragma once

#include <string>
#include <vector>

#include "../fixture/fixture_cache.hpp"
#include "cli_run.hpp"

namespace epyctune::testing {

struct CliHost {
  ScratchDir dir;
  explicit CliHost(const std::string& machine) {
    fixture::FixtureOptions o;
    o.machine = machine;
    fixture::create_fixture(dir.path(), o);
  }
  std::string root() const { return dir.path().string(); }
  // `epyctune --sysroot ROOT args...`
  CliRun run(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--sysroot", root()});
    return run_cli(EPYCTUNE_BIN, args);
  }
};

inline CliRun cli(const std::vector<std::string>& args) {
  return run_cli(EPYCTUNE_BIN, args);
}

inline bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

}  // namespace epyctune::testing
