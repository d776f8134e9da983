// epyctune-mkmodel: synthetic models and vocabularies for the tests and
// benchmarks. A development tool, built with the project and never installed:
// the packaged epyctune-engine only runs models.
#include <CLI/CLI.hpp>
#include <string>

#include "common/version.hpp"
#include "tools/epyctune-mkmodel/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "epyctune-mkmodel: synthetic GGUF models, draft pairs, greedy margins and vocabularies "
      "for tests and benchmarks (a development tool, not installed)"};
  app.name(argv[0]);
  app.require_subcommand(1);
  app.set_version_flag("--version", "epyctune-mkmodel " + std::string(epyctune::kVersion));
  int exit_code = 0;
  epyctune::mkmodel_tool::add_mkmodel_command(app, exit_code);
  epyctune::mkmodel_tool::add_margins_command(app, exit_code);
  epyctune::mkmodel_tool::add_vocab_command(app, exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
