// The one place the CLI's logging is set up: spdlog's default logger, to
// stderr, so stdout stays the command's output (JSON included).
#pragma once

namespace epyctune::cli {

// 0 = warnings and errors only, 1 (-v) = info, 2 or more (-vv) = debug: every
// host file read and written.
void setup_logging(int verbosity);

}  // namespace epyctune::cli
