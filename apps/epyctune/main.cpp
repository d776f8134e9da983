// epyctune: the CLI. Each subcommand lives in its own cmd_*.cpp and is added here.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "apps/epyctune/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"epyctune: tune an AMD EPYC host for CPU inference, and prove it in tok/s"};
  app.require_subcommand(1);
  epyctune::cli::GlobalOptions global;
  app.add_option("--sysroot", global.sysroot,
                 "Treat DIR as the host's root (/sys, /proc, /dev/cpu, /etc under it)")
      ->type_name("DIR");
  app.add_option("--topology", global.topology_xml, "Read the topology from an lstopo XML export")
      ->type_name("FILE.xml");
  app.add_flag("-v,--verbose", global.verbose, "Log what is read and written");
  // Subcommands are registered by the files that implement them.
  for (auto* reg : epyctune::cli::registry()) reg(app, global);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return global.exit_code;
}
