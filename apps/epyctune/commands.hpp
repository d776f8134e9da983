// Subcommand registration. A cmd_*.cpp file adds itself with a static
// Registrar, so adding a command never edits main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "stack/session.hpp"

namespace epyctune::cli {

struct GlobalOptions {
  std::string sysroot = "/";
  std::string topology_xml;
  int verbose = 0;          // how many -v
  int exit_code = kExitOk;  // set by the command's callback
};

// stack::open_session with the global options, logging what it read.
stack::Session open_session(const GlobalOptions& g, const std::string& profile,
                            const std::string& steps, bool force);

using RegisterFn = void (*)(CLI::App& app, GlobalOptions& global);
std::vector<RegisterFn>& registry();

struct Registrar {
  explicit Registrar(RegisterFn fn) { registry().push_back(fn); }
};

}  // namespace epyctune::cli
