// The whole of epyctune's main, apart from main() itself: the shipped binary
// (main.cpp) and the tests' build of the CLI with its test hooks
// (tests/cli_hooks) run the same code.
#pragma once

namespace epyctune::cli {

// Parses the command line, runs the subcommand and returns the exit code.
int run_main(int argc, char** argv);

}  // namespace epyctune::cli
