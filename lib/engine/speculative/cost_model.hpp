// What a speculative round costs on this host, and the speed-up it predicts.
//
// A model's pass time by batch size (measured once per host and model with a
// few forward passes of n tokens truncated back, then cached) gives the
// verify pass at K (n = K + 1) and the draft's cost per proposal (n = 1).
// With acceptance by position it predicts tokens per second for every draft
// source, K and mode; the adaptive controller starts from it and corrects it
// with the timings of the rounds it runs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/model/causal_lm.hpp"

namespace epyctune::engine::speculative {

// Seconds of one forward pass of n tokens, at the measured n (increasing,
// starting at 1); linear in between and past the last.
struct PassTimes {
  std::vector<int> n;
  std::vector<double> s;
  bool empty() const { return n.empty(); }
  double at(int tokens) const;
};

struct CostModel {
  PassTimes target;       // the verify pass: K proposals = K + 1 tokens
  double draft_s = 0.0;   // the verifier's cost per proposal (one draft pass)
  bool overlap = false;   // partitioned: drafts are computed while the target verifies
  bool measured = false;  // false: relative defaults (plain pass = 1)
  // Partitioned runs that hand the draft's CPUs to the target while they
  // decode plain: a single-token pass on every CPU of both sides (0: plain
  // passes run on the verify side, at verify_seconds(0)).
  double handback_plain_s = 0.0;
  // A parallel (PARD) draft proposes K in one pass over the last accepted
  // tokens and K - 1 masks: about K + 1 tokens, timed in draft_pass.
  bool parallel_draft = false;
  PassTimes draft_pass;

  double verify_seconds(int k) const { return target.at(k + 1); }
  double plain_seconds() const {
    return handback_plain_s > 0 ? handback_plain_s : verify_seconds(0);
  }
  // The draft's pass sizes to time: one token, or up to K+1 for a parallel draft.
  static int draft_tokens_to_time(bool parallel, int max_k) { return parallel ? max_k + 1 : 1; }
  // Takes the draft's timed passes: draft_s from the one-token pass, and the
  // whole curve for a parallel draft.
  void set_draft_times(const PassTimes& t, bool parallel) {
    draft_s = t.at(1);
    parallel_draft = parallel;
    draft_pass = parallel ? t : PassTimes{};
  }
  // The draft's time for K proposals: K passes, or one parallel pass.
  double draft_seconds(int k) const {
    if (k <= 0) return 0.0;
    return parallel_draft && !draft_pass.empty() ? draft_pass.at(k + 1) : draft_s * k;
  }
  // Shared: the draft passes, then the verify. Partitioned: the slower of the two.
  double round_seconds(int k) const;
};

// Relative defaults for when nothing is measured: a verify pass that grows
// slowly with K (weights stream once per pass) and a draft at a tenth of it.
CostModel default_cost_model();

// E(K) = 1 + sum_{i<=K} prod_{j<=i} a_j; a_j for j past accept.size() repeats
// the last entry (0 when empty).
double expected_tokens(int k, std::span<const double> accept);
// Tokens per second of K against plain decoding (one single-token pass per token).
double predicted_speedup(const CostModel& c, int k, std::span<const double> accept);
// The K in 1..max_k with the most tokens per second under c when each
// proposal is accepted with probability accept (the first such K on a tie).
struct BestK {
  int k = 1;
  double tokens_per_s = 0.0;
};
BestK best_draft_k(const CostModel& c, int max_k, double accept);

// Times passes of the batch sizes up to max_tokens after a ctx-token context,
// median of `passes` each. Leaves the model's cache empty.
PassTimes measure_pass_times(CausalLM& m, int max_tokens, int ctx = 64, int passes = 3);

// The probe a first run pays for: the fastest of two passes of one token and
// of probe_largest(max_tokens) (after a warm-up), no context. Pass time is
// close to a line in the tokens, and the adaptive controller refits the
// line from the rounds it times, so two points seed it: seconds for a 7B on
// two CPUs, where the full curve (measure_pass_times) costs a minute.
constexpr int kProbeLargest = 5;
int probe_largest(int max_tokens);
PassTimes probe_pass_times(CausalLM& m, int max_tokens);

// The cache: one JSON file per model and host in $CACHE_DIRECTORY (systemd's
// CacheDirectory=, the daemon's instances), else $XDG_CACHE_HOME/epyctune,
// else ~/.cache/epyctune. The key names the model file (path, size,
// mtime), the CPUs and the ISA, so any change re-measures.
std::filesystem::path cost_cache_dir();
std::string cost_cache_key(const std::filesystem::path& model, const std::string& cpus,
                           const std::string& isa);
// nullopt (and why, in *why) when the file is missing, malformed, for
// another key, or holds non-positive or non-finite times.
std::optional<PassTimes> read_cost_cache(const std::filesystem::path& file, const std::string& key,
                                         std::string* why = nullptr);
void write_cost_cache(const std::filesystem::path& file, const std::string& key,
                      const PassTimes& t);
std::filesystem::path cost_cache_file(const std::filesystem::path& dir, const std::string& key);

// The cached pass times when valid (up to probe_largest(max_tokens) at
// least), else probed (probe_pass_times) and written back (a
// cache that cannot be written is only a note). use_cache false: measure,
// neither read nor write.
PassTimes cached_pass_times(CausalLM& m, const std::string& key, int max_tokens, bool use_cache,
                            std::string* note = nullptr);

}  // namespace epyctune::engine::speculative
