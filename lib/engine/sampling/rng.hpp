// Seeded pseudo-random numbers that are identical on every platform and
// standard library: xoshiro256** seeded through splitmix64, and uniforms built
// from the top 53 bits. std::*_distribution is avoided on purpose — its outputs
// differ between libstdc++ versions, which would make seeds non-reproducible.
#pragma once

#include <cstdint>

namespace epyctune::engine::sampling {

// One splitmix64 step: a good 64-bit mixer, used to expand seeds.
uint64_t splitmix64(uint64_t& state);

class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed);
  uint64_t next();
  // Uniform double in [0, 1) with 53 random bits.
  double uniform();

 private:
  uint64_t s_[4];
};

// Random streams used by generation. Every random draw is keyed by
// (seed, sequence position, stream) rather than taken from one running
// generator: the draw for position n is then the same no matter how many
// tokens were drafted, discarded or verified before it, so a fixed seed gives
// the same text in every speculation mode and at any thread timing.
enum class Stream : uint64_t {
  target_sample = 0,  // the target's own pick at a position (plain decode, bonus token)
  draft_sample = 1,   // the draft model's proposal at a position
  accept = 2,         // rejection sampling: the accept/reject coin
  resample = 3,       // rejection sampling: the draw from the residual distribution
};
double uniform_at(uint64_t seed, int64_t position, Stream stream);

}  // namespace epyctune::engine::sampling
