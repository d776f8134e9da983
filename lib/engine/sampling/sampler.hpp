// Turning logits into a token: greedy, temperature, top-k, top-p, min-p.
//
// The filters are applied in one fixed order — temperature, then top-k, then
// top-p, then min-p — and the result is exposed as a full probability vector
// (zeros for filtered tokens). Speculative rejection sampling needs exactly
// that: p from the target and q from the draft, both after the same transforms.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling/rng.hpp"

namespace epyctune::engine::sampling {

struct SamplerParams {
  float temperature = 0.0f;  // <= 0 means greedy (argmax)
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
  // Throws std::invalid_argument naming the bad field and its valid range.
  void validate() const;
};

// Index of the largest logit; the lowest index wins ties and NaN never wins,
// so the target and every speculative path agree on the same token.
int argmax(std::span<const float> logits);

// The final distribution after all filters, written to probs (resized to
// logits.size()). Greedy parameters give a one-hot vector at argmax.
void probabilities(std::span<const float> logits, const SamplerParams& params,
                   std::vector<float>& probs);

// Inverse-CDF draw with u in [0, 1): the first token whose cumulative
// probability exceeds u * sum(probs). Zero-probability tokens are never drawn.
// Throws std::invalid_argument if probs has no positive entry.
int sample_from(std::span<const float> probs, double u);

// Samples tokens for a sequence. The random draw for a position depends only on
// (seed, position), see rng.hpp.
class Sampler {
 public:
  explicit Sampler(SamplerParams params);
  const SamplerParams& params() const { return params_; }
  // Token for sequence position `position` given the logits predicting it.
  int sample(std::span<const float> logits, int64_t position);
  // The distribution the last sample() drew from (empty after a greedy pick).
  const std::vector<float>& last_probs() const { return probs_; }

 private:
  SamplerParams params_;
  std::vector<float> probs_;
};

}  // namespace epyctune::engine::sampling
