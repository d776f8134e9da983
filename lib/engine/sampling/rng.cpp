#include "engine/sampling/rng.hpp"

namespace epyctune::engine::sampling {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Xoshiro256::Xoshiro256(uint64_t seed) {
  uint64_t sm = seed;
  for (auto& s : s_) s = splitmix64(sm);
}

static inline uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

uint64_t Xoshiro256::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Xoshiro256::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

double uniform_at(uint64_t seed, int64_t position, Stream stream) {
  // Mix the three keys through splitmix so nearby positions/streams give
  // unrelated generator states.
  uint64_t st = seed;
  uint64_t k = splitmix64(st);
  k ^= static_cast<uint64_t>(position) * 0xd1b54a32d192ed03ULL;
  k ^= (static_cast<uint64_t>(stream) + 1) * 0x8cb92ba72f3d8dd7ULL;
  Xoshiro256 rng(k);
  return rng.uniform();
}

}  // namespace epyctune::engine::sampling
