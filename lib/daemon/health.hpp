// The engine's /health endpoint, asked over loopback HTTP (cpp-httplib): kept
// in its own file so only it pays for the header-only library's compile time.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace epyctune::daemon {

// The /health JSON when the engine answers 200 with a JSON body within
// timeout_ms; nullopt otherwise (not listening yet, loading, an error).
std::optional<nlohmann::json> get_health(const std::string& host, int port, int timeout_ms);

// "http://HOST:PORT" from the engine's ready line ("listening on http://...").
// Returns false when the line is not the ready line.
bool parse_ready_line(const std::string& line, std::string& host, int& port);

}  // namespace epyctune::daemon
