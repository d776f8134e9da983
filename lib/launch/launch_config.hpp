// The launch plan: the one description of where the engine runs. The tuner
// computes it from a profile and the host (launch/from_profile.hpp), steps 7
// and 8 write it as the launch config (TOML, docs/launch-config.md), and the
// engine reads it back with `--launch-config FILE`. This header is the format
// only: no profile, host or stack types, so the engine can link it alone.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace epyctune::launch {

// A launch config that cannot be used; the message names the file, the line
// when known, and the fix.
class LaunchConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One side of the partition (the draft model's, or the target's).
struct Side {
  std::vector<int> l3;        // L3 domain indices (the profile's numbering), for reports
  std::vector<int> cpus;      // OS CPU numbers the side's pool is pinned to
  std::vector<int> nodes;     // NUMA nodes of those CPUs
  int threads = 0;            // pool size: the first `threads` of cpus (0 = all)
  std::string resctrl_group;  // "" = no CAT group to join
};

struct WeightPolicy {
  std::string layout = "interleave";  // "interleave" | "split" | "local"
  bool hugepages = true;
  std::vector<int> target_nodes;  // mbind nodes of the target's weights and KV cache
  std::vector<int> draft_nodes;   // mbind nodes of the draft's weights and KV cache
};

struct SpecPolicy {
  std::string draft_source = "model";  // "model" | "lookup" | "cascade"
  int draft_len = 8;
};

// What to run; written by `epyctune run`/`bench`, never by the stack's steps.
struct Models {
  std::string target;
  std::string draft;  // "" = none
  int lookup = 0;     // n-gram lookup drafting, longest n-gram (0 = off)
};

struct LaunchPlan {
  std::string profile;  // the profile the plan came from (informational)
  // Which sections the plan holds: step 7 writes [weights], step 8 [spec];
  // a file with only one of them is valid (only that step applied).
  bool has_weights = false;
  bool has_spec = false;
  bool has_models = false;
  Side draft, verify;
  std::vector<int> housekeeping_cpus;
  WeightPolicy weights;
  SpecPolicy spec;
  Models models;
};

// Section texts, each starting with its "[name]" header and one comment line,
// then the keys as toml++ writes them. Steps 7 and 8 own one section each.
std::string weights_section(const LaunchPlan& p);
std::string spec_section(const LaunchPlan& p);
std::string models_section(const LaunchPlan& p);
// The whole file: every section the plan has.
std::string to_toml(const LaunchPlan& p);

// Throws LaunchConfigError naming `source`, the line and the fix for bad TOML,
// unknown sections or keys, wrong types, bad CPU lists and overlapping sides.
LaunchPlan parse_launch_config(std::string_view text, const std::string& source);
LaunchPlan read_launch_config(const std::filesystem::path& file);

// Threads a side runs: `threads` when set, else one per CPU.
int side_threads(const Side& s);

}  // namespace epyctune::launch
