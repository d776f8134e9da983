#include "apps/epyctune/logging.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace epyctune::cli {

void setup_logging(int verbosity) {
  auto logger = spdlog::get("epyctune");
  if (!logger) {
    logger = spdlog::stderr_logger_mt("epyctune");
    logger->set_pattern("epyctune: %l: %v");
    spdlog::set_default_logger(logger);
  }
  auto level = verbosity >= 2   ? spdlog::level::debug
               : verbosity == 1 ? spdlog::level::info
                                : spdlog::level::warn;
  logger->set_level(level);
}

}  // namespace epyctune::cli
