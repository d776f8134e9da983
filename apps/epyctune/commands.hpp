// Subcommand registration. A cmd_*.cpp file adds itself with a static
// Registrar, so adding a command never edits main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace epyctune::cli {

struct GlobalOptions {
  std::string sysroot = "/";
  std::string topology_xml;
  bool verbose = false;
  int exit_code = 0;  // set by the command's callback
};

using RegisterFn = void (*)(CLI::App& app, GlobalOptions& global);
std::vector<RegisterFn>& registry();

struct Registrar {
  explicit Registrar(RegisterFn fn) { registry().push_back(fn); }
};

}  // namespace epyctune::cli
