// `mkmodel --pair-of TARGET --agreement A`: a draft model for an existing
// target whose greedy next-token predictions agree with the target's about A
// of the time, so speculation can be measured at a known acceptance rate.
//
// How the structure is planted: the draft IS the target's first L layers —
// the same vocabulary, token embedding, those L blocks and the final norm,
// copied row for row (dequantised and requantised to the target's type) — so
// its hidden state is the target's hidden state at depth L. That alone
// agrees with the target some fraction A0 of the time (the skipped layers
// are what it misses). The agreement is then lowered to A by seeded
// Gaussian noise on the draft's own output head, scaled per row to the
// row's standard deviation: noise scale s -> agreement falls monotonically
// from A0 toward chance. s is found by bisection, each step writing the draft
// and measuring agreement by running both models on the same greedy target
// trajectories (teacher forcing: the draft sees exactly the target's
// context). When A0 < A, L grows one layer at a time until the copy alone
// is good enough, so the draft is the smallest such copy. The
// reported agreement is re-measured on held-out trajectories.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace epyctune::engine {
namespace runtime {
class ThreadPool;
}

struct PairOptions {
  double agreement = 0.7;   // the A to reach, in (0, 1]
  double tolerance = 0.02;  // stop bisection within this of A on the calibration set
  uint64_t seed = 1;        // noise and trajectory prompts
  int draft_layers = 0;     // 0: start at max(1, target_layers / 8) and grow as needed
  int sequences = 16;       // calibration trajectories (held-out set: half as many)
  int steps = 32;           // greedy target steps per trajectory
  int max_iterations = 12;  // bisection steps per layer count
  // Also mark the draft PARD-style: its last vocabulary id becomes the mask
  // token (speculative::PARD_MASK_KEY), so it drafts a batch per pass. The
  // weights are not trained for it: only the first token of a batch is
  // predicted as well as the autoregressive draft's.
  bool pard = false;
  std::function<void(const std::string&)> log;  // progress lines
};

struct PairReport {
  int target_layers = 0;
  int draft_layers = 0;
  double copy_agreement = 0.0;  // A0: the layer copy without noise (calibration set)
  double noise_scale = 0.0;
  double calibration_agreement = 0.0;
  double holdout_agreement = 0.0;  // the figure to quote
  int holdout_samples = 0;
  int iterations = 0;  // drafts written and measured
  uint64_t target_params = 0, draft_params = 0;
  bool reached = false;  // |holdout - A| <= 0.05
  std::string note;      // why A was not reached, when it was not
};

// Writes the draft to out. Throws std::runtime_error naming the file for a
// target this cannot pair (not llama, rope scaling).
PairReport write_draft_pair(const std::filesystem::path& target, const std::filesystem::path& out,
                            const PairOptions& opts, runtime::ThreadPool& pool);

}  // namespace epyctune::engine
