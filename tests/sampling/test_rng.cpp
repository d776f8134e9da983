#include <doctest/doctest.h>

#include <set>

#include "engine/sampling/rng.hpp"

using namespace epyctune::engine::sampling;

TEST_CASE("splitmix64 matches the reference sequence") {
  // Reference values of Vigna's splitmix64.c seeded with 0.
  uint64_t st = 0;
  CHECK(splitmix64(st) == 0xe220a8397b1dcdafULL);
  CHECK(splitmix64(st) == 0x6e789e6aa1b965f4ULL);
  CHECK(splitmix64(st) == 0x06c45d188009454fULL);
}

TEST_CASE("xoshiro256** is a pure function of its seed") {
  Xoshiro256 a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next();
    CHECK(x == b.next());
    differs |= x != c.next();
  }
  CHECK(differs);
}

TEST_CASE("uniform() lies in [0, 1) and has the right mean") {
  Xoshiro256 r(7);
  double sum = 0.0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = r.uniform();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    sum += u;
  }
  CHECK(sum / n == doctest::Approx(0.5).epsilon(0.01));
}

TEST_CASE("uniform_at depends on seed, position and stream, and on nothing else") {
  CHECK(uniform_at(1, 10, Stream::accept) == uniform_at(1, 10, Stream::accept));
  std::set<double> seen;
  for (uint64_t seed : {1ULL, 2ULL})
    for (int64_t pos : {0, 1, 2, 1000})
      for (Stream s :
           {Stream::target_sample, Stream::draft_sample, Stream::accept, Stream::resample})
        seen.insert(uniform_at(seed, pos, s));
  CHECK(seen.size() == 2 * 4 * 4);
  // Adjacent positions must look independent: their mean stays near 0.5.
  double sum = 0.0;
  for (int64_t pos = 0; pos < 20000; ++pos) sum += uniform_at(5, pos, Stream::target_sample);
  CHECK(sum / 20000 == doctest::Approx(0.5).epsilon(0.02));
}
