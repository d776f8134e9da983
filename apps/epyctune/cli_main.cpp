#include "apps/epyctune/cli_main.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "apps/epyctune/commands.hpp"
#include "apps/epyctune/logging.hpp"
#include "apps/usage_hint.hpp"
#include "common/exit_codes.hpp"
#include "common/version.hpp"

namespace epyctune::cli {

namespace {

// argv[1..] as CLI11 should read it. The engine spells the draft model
// llama.cpp's way, -md; CLI11 would read that as -m with the value "d", so it
// becomes --model-draft here, as it does in epyctune-engine.
std::vector<std::string> arguments(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      args.insert(args.end(), argv + i, argv + argc);
      break;
    }
    if (a == "-md" || a.starts_with("-md=")) a = "--model-draft" + a.substr(3);
    args.push_back(std::move(a));
  }
  return args;
}

}  // namespace

int run_main(int argc, char** argv) {
  setup_logging(0);
  CLI::App app{"epyctune: tune an AMD EPYC host for CPU inference, and prove it in tok/s"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "epyctune " + std::string(kVersion));
  // Subcommands inherit both: global options are accepted after the
  // subcommand too (`epyctune plan --profile 9754 --sysroot DIR`), and every
  // --help ends with the exit-code table.
  app.fallthrough();
  app.footer(std::string(kExitCodesFooter) + "\n");
  GlobalOptions global;
  app.add_option("--sysroot", global.sysroot,
                 "Treat DIR as the host's root (/sys, /proc, /dev/cpu, /etc under it)")
      ->type_name("DIR");
  app.add_option("--topology", global.topology_xml, "Read the topology from an lstopo XML export")
      ->type_name("FILE.xml");
  app.add_flag("-v,--verbose", global.verbose,
               "Log to stderr: -v what is done, -vv every value read and written");
  // Runs after every option is parsed and before the subcommand's callback.
  app.parse_complete_callback([&global] { setup_logging(global.verbose); });
  // Subcommands are registered by the files that implement them.
  for (auto* reg : registry()) reg(app, global);
  app.name("epyctune");
  const auto args = arguments(argc, argv);
  try {
    app.parse(std::vector<std::string>(args.rbegin(), args.rend()));
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with code 0; everything else is usage,
    // told by the word that is wrong when one is.
    if (e.get_exit_code() != 0 && usage::explain_unknown(app, args)) return kExitError;
    return app.exit(e) == 0 ? kExitOk : kExitError;
  }
  return global.exit_code;
}

}  // namespace epyctune::cli
