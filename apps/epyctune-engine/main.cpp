// epyctune-engine: the bundled GGUF inference engine. Subcommands live in cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <string>

#include "apps/epyctune-engine/commands.hpp"
#include "common/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "epyctune-engine: llama-family GGUF inference with CCD-partitioned speculative decoding"};
  app.name(argv[0]);
  app.require_subcommand(1);
  app.set_version_flag("--version", "epyctune-engine " + std::string(epyctune::kVersion));
  epyctune::engine_cli::GlobalOptions global;
  for (auto* reg : epyctune::engine_cli::registry()) reg(app, global);
  try {
    app.parse(epyctune::engine_cli::llama_style_args(argc, argv));
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return global.exit_code;
}
