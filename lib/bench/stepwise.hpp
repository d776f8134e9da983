// A stack measured step by step: stock first, then step 1, then step 2 on top,
// ... each configuration measured R times with the repeats interleaved: every
// round walks stock -> 1 -> 2 -> ... and returns to stock, so a drift of the
// machine over minutes lands in every row alike instead of posing as a step.
// The host side (apply, revert, the engine) is behind StepDriver, so the
// tuner, the engine and tests drive the same logic.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/stats.hpp"

namespace epyctune::bench {

// One engine run.
struct Sample {
  double tok_s = 0;                 // generated tokens / generation time
  std::vector<double> block_tok_s;  // tok/s of consecutive blocks of tokens within the run
  double bytes_per_token = 0;       // weight bytes one target pass reads
  double tokens_per_pass = 1;       // generated tokens per target pass (> 1 speculative)
  std::string cpus;                 // the CPUs the run used, as reported by the engine
  std::string note;                 // e.g. how the plan's CPUs were mapped
  nlohmann::json engine_launch;     // the engine's launch report (null without a launch config)
};

// Tokens per second of consecutive blocks of `block` tokens from the gaps
// between tokens (ms). A burst of tokens accepted in one pass stays inside
// one block when block >= the draft length.
std::vector<double> block_rates(const std::vector<double>& per_token_ms, int block);

struct StepRef {
  int step = 0;      // 0 = stock
  std::string name;  // "stock", "bios", "numa", ...
  std::string title;
  bool drafts = false;  // the engine drafts on this row (speculative decoding)
};

// What became of a row's configuration before any measurement.
enum class RowState {
  measured,      // applied (or stock) and run
  skipped,       // nothing this host can change for the step, or nothing to draft with
  needs_reboot,  // applied, but only takes effect after a reboot
  unsupported,   // applying it failed; the host is back as it was
};
// "measured", "skipped", "needs reboot", "unsupported".
const char* row_state_name(RowState s);

struct StepOutcome {
  RowState state = RowState::measured;
  std::string reason;  // why it is not measured ("" when measured)
};

class StepDriver {
 public:
  virtual ~StepDriver() = default;
  // Back to the host as found (revert everything applied).
  virtual void to_stock() = 0;
  // Applies `step` on top of those before it, and says whether the row can
  // be measured.
  virtual StepOutcome apply_step(const StepRef& step) = 0;
  // Runs the engine once on the current configuration; throws on failure.
  virtual Sample measure(const StepRef& step) = 0;
  // Read bandwidth (GB/s) on the CPUs the configuration's target runs on.
  virtual double bandwidth_gbps(const StepRef& step) = 0;
  // True once SIGINT/SIGTERM arrived: the runner stops at the next boundary.
  virtual bool interrupted() const = 0;
};

struct Row {
  StepRef ref;
  RowState state = RowState::measured;
  std::string reason;  // why it was not measured
  bool measured() const { return state == RowState::measured; }
  // "measured", or the state and its reason ("skipped: no resctrl").
  std::string status() const;
  std::vector<Sample> samples;
  Summary tok_s;
  std::vector<double> bandwidth_samples_gbps;
  double bandwidth_gbps = 0;
  double roofline_tok_s = 0;  // bandwidth / bytes per token x tokens per pass
  int prev = -1;              // index of the previous measured row (-1: none)
  std::optional<Comparison> vs_prev, vs_stock;
  double delta_prev = 0, delta_stock = 0;  // relative change of the median
  std::optional<double> expected_tok_s;    // the profile's figure, if stated
  std::string cpus, note;
};

struct StepwiseOptions {
  std::vector<StepRef> steps;  // without stock; stock is always row 0
  int repeat = 3;
  std::function<void(const std::string&)> progress;  // one line per event (may be empty)
};

struct StepwiseResult {
  std::vector<Row> rows;  // stock first
  bool interrupted = false;
  int rounds = 0;  // complete rounds measured
};

// Leaves the host at stock when it returns (also when it throws).
StepwiseResult run_stepwise(StepDriver& d, const StepwiseOptions& o);

// Fills the comparisons, deltas and rooflines of measured rows.
void analyse(StepwiseResult& r);

}  // namespace epyctune::bench
