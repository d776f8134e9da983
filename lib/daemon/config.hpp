// The daemon's configuration (/etc/epyctune/epyctune.toml, docs/daemon.md):
// which profile to keep applied, how to watch for drift, where to export
// metrics, and which engine instances to run. Parsed strictly: an unknown key,
// a wrong type or a bad value is an error naming the file, the line and the
// fix, because a typo in a daemon's config must not silently fall back to a
// default on a fleet of hosts.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace epyctune::daemon {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct InstanceConfig {
  std::string name;  // [a-zA-Z0-9_-]+, unique: names the launch config and the status entry
  std::string model;
  std::string draft;  // "" = no draft model
  std::string host = "127.0.0.1";
  int port = 8080;
  int queue = 0;          // 0 = the engine's default
  int parallel = 0;       // requests batched at once (serve --parallel); 0 = the engine's default
  std::string kv_budget;  // serve --kv-budget ("" = the engine's default)
  int threads = 0;        // 0 = one per CPU of the instance's partition
  // CPU lists that override the carved slice ("" = carve from the plan).
  std::string cpus, draft_cpus;
  int line = 0;  // where the [[instance]] table starts, for messages

  bool operator==(const InstanceConfig& o) const = default;
};

struct DriftConfig {
  int interval_s = 300;  // re-verify period; 0 = only on events and requests
  bool repair = false;   // re-apply the knobs that drifted
  bool uevents = true;   // re-verify on CPU/memory hotplug uevents
  int debounce_ms = 2000;

  bool operator==(const DriftConfig& o) const = default;
};

struct EngineProcessConfig {
  std::string binary;  // "" = epyctune-engine next to epyctuned, else on PATH
  bool map_cpus = false;
  std::string shared_weights;  // directory for the engine's shared weight mappings ("" = off)
  int ready_timeout_s = 120;
  int stop_timeout_s = 10;
  int restart_backoff_ms = 1000;  // first delay after a crash, doubled per crash
  int restart_backoff_max_ms = 60000;
  int restart_stable_s = 60;  // up this long: the backoff starts over
  int max_restarts = 10;      // crashes in a row before the instance is left failed

  bool operator==(const EngineProcessConfig& o) const = default;
};

struct Config {
  std::string source;  // the file it came from
  std::string profile;
  std::string steps;  // "" = all
  bool force = false;
  bool apply_on_start = true;
  bool revert_on_stop = false;
  bool revert_on_shutdown = false;
  std::string metrics_textfile;  // "" = off; beneath the sysroot
  DriftConfig drift;
  EngineProcessConfig engine;
  std::vector<InstanceConfig> instances;
};

// Throws ConfigError "FILE:LINE: what; fix".
Config parse_config(std::string_view text, const std::string& source);
Config load_config(const std::string& path);

}  // namespace epyctune::daemon
