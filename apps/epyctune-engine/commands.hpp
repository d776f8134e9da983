// Subcommand registration for epyctune-engine: each cmd_*.cpp adds itself
// with a static Registrar, so adding a command never edits main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

namespace epyctune::engine_cli {

struct GlobalOptions {
  int exit_code = 0;  // set by the command's callback
};

using RegisterFn = void (*)(CLI::App& app, GlobalOptions& global);
std::vector<RegisterFn>& registry();

struct Registrar {
  explicit Registrar(RegisterFn fn) { registry().push_back(fn); }
};

}  // namespace epyctune::engine_cli
