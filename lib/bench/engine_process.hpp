// Runs the epyctune-engine binary as a child process and reads its JSON, so a
// crash of the engine (or of the model code) never takes the tuner down with
// its journal half-reverted. SIGINT/SIGTERM (see interrupt.hpp) end the child.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/stepwise.hpp"

namespace epyctune::bench {

// The engine failed: exited non-zero, died of a signal, or printed bad JSON.
class EngineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// SIGINT/SIGTERM arrived while the engine ran; the child has been stopped.
class Interrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// epyctune-engine next to `self` (the running binary), else `epyctune-engine`
// on PATH. EPYCTUNE_ENGINE overrides both.
std::filesystem::path find_engine(const std::filesystem::path& self);

struct ProcessResult {
  int exit_code = 0;  // 128 + signal when killed
  std::string out, err;
};

// Runs argv (argv[0] = program path) and collects stdout/stderr. With
// `passthrough`, the child writes to our stdout/stderr instead.
ProcessResult run_process(const std::vector<std::string>& argv, bool passthrough = false);

// `generate --json` output -> one Sample (block = tokens per block of block_tok_s).
Sample sample_from_generate_json(const nlohmann::json& j, int block);

}  // namespace epyctune::bench
