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

// Which model a side runs: the draft proposes, the target verifies.
enum class Role { draft, verify };
// "draft" | "verify": the name in reports, JSON and the file's key prefixes.
const char* role_name(Role r);

// One side of the partition: the one shape of "where a model runs", from the
// profile's partition through the launch config and the daemon's slices to
// the engine's pools.
struct Side {
  explicit Side(Role r = Role::verify) : role(r) {}
  Role role;
  std::vector<int> cpus;   // OS CPU numbers the side's pool is pinned to
  std::vector<int> nodes;  // NUMA nodes of those CPUs
  std::vector<int> l3;     // L3 domain indices (the profile's numbering), for reports
  int threads = 0;         // pool size: the first `threads` of cpus (0 = all)
  std::string group;       // resctrl (CAT) group its threads join; "" = none
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
  Side draft{Role::draft}, verify{Role::verify};
  std::vector<int> housekeeping_cpus;
  WeightPolicy weights;
  SpecPolicy spec;
  Models models;
  // Why these CPUs: the engine's own choice, or how a plan was mapped onto
  // this machine. Reported, never written to the file.
  std::string reason;

  const Side& side(Role r) const { return r == Role::draft ? draft : verify; }
  Side& side(Role r) { return r == Role::draft ? draft : verify; }
  // The draft has CPUs of its own, so both models run at once; otherwise a
  // draft alternates with the target on the verify side's CPUs.
  bool partitioned() const { return !draft.cpus.empty() && draft.cpus != verify.cpus; }
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

// Where a "local" layout puts the target's weights: every layer on one node,
// the first the target runs on; the other layouts use all of them.
std::vector<int> target_weight_nodes(const std::string& layout, const std::vector<int>& nodes);

}  // namespace epyctune::launch
