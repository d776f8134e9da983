// epyctune: the CLI. Each subcommand lives in its own cmd_*.cpp and registers
// itself; the shipped binary installs no test hooks.
#include "apps/epyctune/cli_main.hpp"

int main(int argc, char** argv) {
  return epyctune::cli::run_main(argc, argv);
}
