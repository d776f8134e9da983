// The subcommands of epyctune-mkmodel. Each adds itself to the app and
// reports its exit status through exit_code, set by its callback.
#pragma once

#include <CLI/CLI.hpp>

namespace epyctune::mkmodel_tool {

void add_mkmodel_command(CLI::App& app, int& exit_code);
void add_margins_command(CLI::App& app, int& exit_code);
void add_vocab_command(CLI::App& app, int& exit_code);

}  // namespace epyctune::mkmodel_tool
