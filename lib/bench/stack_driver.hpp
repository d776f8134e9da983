// The StepDriver of a real (or fixture) host: applies the stack's steps with
// the journaled apply, reverts with the journal, and measures each
// configuration by running epyctune-engine on the launch config the steps
// wrote. Lives beside lib/bench but in its own target (it needs lib/stack).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "bench/stepwise.hpp"
#include "launch/launch_config.hpp"
#include "stack/session.hpp"

namespace epyctune::bench {

struct EngineRunOptions {
  std::filesystem::path engine;  // epyctune-engine binary
  std::string model, draft;
  int lookup = 0;
  int tokens = 32;
  std::string prompt = "The quick brown fox jumps over the lazy dog. Once upon a time";
  int block = 8;  // tokens per block of the within-run samples
};

// The CPUs a launch config's target side runs on here and the engine flags
// that go with it; also used by `epyctune run`.
struct EngineLaunch {
  std::vector<std::string> args;  // appended to `epyctune-engine generate`
  std::vector<int> target_cpus;   // where the target runs (for the bandwidth probe)
  std::string note;               // CPU mapping, when the plan's CPUs are not all here
};
// `launch_config` "" = no launch config (the engine's own partition picker).
// The [models] section is added to a copy written into `work_dir`.
EngineLaunch engine_launch(const stack::Session& s, const std::string& launch_config,
                           const EngineRunOptions& o, bool speculative,
                           const std::filesystem::path& work_dir);

// The stack's steps a bench walks: those that change the host.
std::vector<StepRef> bench_steps(const std::string& steps_spec);

class StackDriver : public StepDriver {
 public:
  StackDriver(const stack::Session& s, EngineRunOptions o, std::filesystem::path work_dir,
              size_t bandwidth_mib = 256);
  void to_stock() override;
  StepOutcome apply_step(const StepRef& step) override;
  Sample measure(const StepRef& step) override;
  double bandwidth_gbps(const StepRef& step) override;
  bool interrupted() const override;

  // Launch-config notes gathered while measuring (CPU mapping).
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  std::string current_launch_config() const;  // "" while steps 7/8 have not written it
  EngineLaunch launch_for(const StepRef& step) const;

  const stack::Session& s_;
  EngineRunOptions o_;
  std::filesystem::path work_dir_;
  size_t bw_mib_;
  std::vector<int> applied_;
  std::vector<std::string> notes_;
};

}  // namespace epyctune::bench
