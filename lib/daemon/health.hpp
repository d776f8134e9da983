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

// What an engine's /health says of its load, for `engine status`:
// active_sequences, kv_blocks_used, kv_blocks_total, kv_block_tokens and
// kv_used_pct (null each where /health lacks it: engines before the paged KV
// pool), parallel and the queue's in_flight and depth.
nlohmann::json serving_load(const nlohmann::json& health);

// Adds "serving" to each instance of an engine.status reply ({"instances":
// [...]}) whose state is "running": serving_load of its /health, or null when
// it did not answer within timeout_ms. Asks them one after the other; meant
// to run without the daemon's lock held.
void add_serving_load(nlohmann::json& status, int timeout_ms);

// "http://HOST:PORT" from the engine's ready line ("listening on http://...").
// Returns false when the line is not the ready line.
bool parse_ready_line(const std::string& line, std::string& host, int& port);

}  // namespace epyctune::daemon
