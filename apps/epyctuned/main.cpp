// epyctuned [--config FILE] [--sysroot DIR] [--socket PATH] [-v|-vv] [--version]:
// the daemon that applies the profile at start, keeps the host in tune and
// runs the engine instances (docs/daemon.md).
#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>

#ifdef EPYCTUNE_HAVE_SYSTEMD
#include <spdlog/sinks/systemd_sink.h>
#endif

#include "apps/usage_hint.hpp"
#include "common/version.hpp"
#include "daemon/daemon.hpp"

namespace {

namespace fs = std::filesystem;

// Under systemd (JOURNAL_STREAM says stderr is the journal, INVOCATION_ID that
// a unit runs us) each event goes to the journal with its priority;
// otherwise one line per event on stderr.
void setup_logging(int verbosity) {
  std::shared_ptr<spdlog::logger> logger;
#ifdef EPYCTUNE_HAVE_SYSTEMD
  if (std::getenv("JOURNAL_STREAM") || std::getenv("INVOCATION_ID")) {
    auto sink = std::make_shared<spdlog::sinks::systemd_sink_mt>("epyctuned");
    logger = std::make_shared<spdlog::logger>("epyctuned", sink);
  }
#endif
  if (!logger) {
    logger = spdlog::stderr_logger_mt("epyctuned");
    logger->set_pattern("epyctuned: %l: %v");
  }
  logger->set_level(verbosity >= 2   ? spdlog::level::trace
                    : verbosity == 1 ? spdlog::level::debug
                                     : spdlog::level::info);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

// EPYCTUNE_ENGINE, else epyctune-engine beside us or in ../bin (the package
// puts epyctuned in /usr/sbin and the engine in /usr/bin), else on PATH.
std::string find_engine() {
  if (const char* e = std::getenv("EPYCTUNE_ENGINE"); e && *e) return e;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (const auto& p : {self.parent_path() / "epyctune-engine",
                          self.parent_path().parent_path() / "bin" / "epyctune-engine"})
      if (::access(p.c_str(), X_OK) == 0) return p.string();
  if (const char* path = std::getenv("PATH"))
    for (const auto& dir : CLI::detail::split(path, ':'))
      if (!dir.empty() && ::access((fs::path(dir) / "epyctune-engine").c_str(), X_OK) == 0)
        return (fs::path(dir) / "epyctune-engine").string();
  return "/usr/bin/epyctune-engine";
}

}  // namespace

int main(int argc, char** argv) {
  epyctune::daemon::DaemonOptions o;
  int verbosity = 0;
  CLI::App app{
      "epyctuned: applies the epyctune profile, keeps the host in tune and runs the "
      "engine instances (docs/daemon.md)"};
  app.add_option("--config", o.config, "The daemon's config")->capture_default_str();
  app.add_option("--sysroot", o.sysroot, "Host root (a fixture tree in tests)")
      ->capture_default_str();
  app.add_option("--socket", o.socket,
                 "Control socket (default /run/epyctune/epyctuned.sock beneath the sysroot)");
  app.add_flag("-v", verbosity, "More logging: -v debug, -vv trace");
  app.set_version_flag("--version", fmt::format("epyctuned {}", epyctune::kVersion));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A mistyped option is named, with the nearest known ones.
    if (e.get_exit_code() != 0 && epyctune::usage::explain_unknown(app, {argv + 1, argv + argc}))
      return e.get_exit_code();
    return app.exit(e);
  }
  setup_logging(verbosity);
  o.engine = find_engine();
  try {
    epyctune::daemon::Daemon d(o);
    return d.run();
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 1;
  }
}
