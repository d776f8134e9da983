// epyctune-engine: the bundled GGUF inference engine. Subcommands live in cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "apps/epyctune-engine/commands.hpp"
#include "apps/usage_hint.hpp"
#include "common/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "epyctune-engine: llama-family GGUF inference with CCD-partitioned speculative decoding"};
  app.name(argv[0]);
  app.require_subcommand(1);
  app.set_version_flag("--version", "epyctune-engine " + std::string(epyctune::kVersion));
  epyctune::engine_cli::GlobalOptions global;
  for (auto* reg : epyctune::engine_cli::registry()) reg(app, global);
  auto args = epyctune::engine_cli::llama_style_args(argc, argv);
  try {
    app.parse(std::vector<std::string>(args));
  } catch (const CLI::ParseError& e) {
    // The model writers left the packaged engine for a dev tool; say where.
    const std::string_view cmd = argc > 1 ? argv[1] : "";
    if (cmd == "mkmodel" || cmd == "margins" || cmd == "vocab") {
      std::fprintf(stderr,
                   "epyctune-engine: '%s' is in the dev tool epyctune-mkmodel, built with the "
                   "project (build/tools/epyctune-mkmodel/) and not packaged\n",
                   argv[1]);
      return app.exit(e);
    }
    // Any other mistyped command or option is named, with the nearest known ones.
    if (e.get_exit_code() != 0 &&
        epyctune::usage::explain_unknown(app, {args.rbegin(), args.rend()}))
      return e.get_exit_code();
    return app.exit(e);
  }
  return global.exit_code;
}
