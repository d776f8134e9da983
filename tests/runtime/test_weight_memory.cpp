#include <doctest/doctest.h>

#include <cstring>

#include "engine/runtime/weight_memory.hpp"

using namespace epyctune::engine::runtime;

TEST_CASE("weight memory is 2 MiB aligned, writable, and says which pages it got") {
  for (bool huge : {false, true}) {
    auto m = WeightMemory::allocate(3 << 20, huge);
    REQUIRE(m.data() != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(m.data()) % (2u << 20) == 0);
    CHECK(m.size() >= (3u << 20));
    std::memset(m.data(), 7, 3 << 20);
    CHECK(m.data()[(3 << 20) - 1] == 7);
    // hugetlb only when asked; THP otherwise; 4 KiB only when madvise failed, and said so.
    if (!huge) CHECK(m.kind() != PageKind::hugetlb);
    if (m.kind() == PageKind::small)
      CHECK(m.fallback_reason().find("MADV_HUGEPAGE") != std::string::npos);
    std::string err;
    CHECK(m.bind(0, m.size(), NumaPolicy::none, {}, err));
    WeightMemory moved = std::move(m);
    CHECK(moved.data()[0] == 7);
    CHECK(m.data() == nullptr);
  }
  CHECK(parse_numa_policy("split") == NumaPolicy::split);
  CHECK_THROWS_WITH(parse_numa_policy("x"), doctest::Contains("interleave"));
}
