#include <doctest/doctest.h>

#include "engine/runtime/numa_maps.hpp"

using namespace epyctune::engine::runtime;

static const char* kSample =
    "55d0c0a00000 default file=/usr/bin/epyctune-engine mapped=12 mapmax=2 N0=12 "
    "kernelpagesize_kB=4\n"
    "7f0000000000 interleave:0-1 anon=1024 dirty=1024 N0=512 N1=512 kernelpagesize_kB=4\n"
    "7f0000400000 bind:1 anon=4 dirty=4 N1=4 kernelpagesize_kB=2048\n"
    "7f1000000000 default file=/models/m.gguf mapped=300 active=0 N0=100 N1=200 "
    "kernelpagesize_kB=4\n"
    "7ffd0000 default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4\n"
    "7f2000000000 default file=/dev/hugepages/x huge dirty=2 N0=2 kernelpagesize_kB=2048\n";

TEST_CASE("numa_maps lines parse: policy, file, page size, pages per node") {
  auto e = parse_numa_maps(kSample);
  REQUIRE(e.size() == 6);
  CHECK(e[0].start == 0x55d0c0a00000ull);
  CHECK(e[0].file == "/usr/bin/epyctune-engine");
  CHECK(e[1].policy == "interleave:0-1");
  CHECK(e[1].pages.at(0) == 512);
  CHECK(e[1].pages.at(1) == 512);
  CHECK(e[2].page_size == 2u << 20);
  CHECK(e[5].huge);
  CHECK(e[4].file.empty());
}

TEST_CASE("placement sums only the VMAs that start inside the weight ranges") {
  auto e = parse_numa_maps(kSample);
  Placement p = placement_of(e, {{0x7f0000000000ull, 0x7f0000800000ull}});
  CHECK(p.bytes_per_node.at(0) == 512 * 4096ull);
  CHECK(p.bytes_per_node.at(1) == 512 * 4096ull + 4 * (2ull << 20));
  CHECK(p.total_bytes() == 1024 * 4096ull + 4 * (2ull << 20));
  CHECK(p.page_size == 2u << 20);
  CHECK(p.policies.size() == 2);
  CHECK(p.summary().find("node1") != std::string::npos);
  Placement none = placement_of(e, {{1, 2}});
  CHECK(none.total_bytes() == 0);
}

TEST_CASE("malformed numa_maps lines name the line") {
  CHECK_THROWS_WITH(parse_numa_maps("7f00 default N0=1\nzz default\n"),
                    doctest::Contains("line 2"));
  CHECK_THROWS_WITH(parse_numa_maps("7f00 default Nx=1 N0=abc\n"), doctest::Contains("line 1"));
}

TEST_CASE("smaps AnonHugePages is summed over the mappings that overlap the ranges") {
  const char* smaps =
      "7f0000000000-7f0000800000 rw-p 00000000 00:00 0\n"
      "Size:               8192 kB\n"
      "AnonHugePages:      6144 kB\n"
      "7f0000800000-7f0000a00000 rw-p 00000000 00:00 0 \n"
      "AnonHugePages:      2048 kB\n"
      "7f1000000000-7f1000200000 r--p 00000000 08:01 123   /models/m.gguf\n"
      "AnonHugePages:         0 kB\n";
  CHECK(anon_huge_bytes(smaps, {{0x7f0000000000ull, 0x7f0000a00000ull}}) == 8192ull * 1024);
  CHECK(anon_huge_bytes(smaps, {{0x7f0000100000ull, 0x7f0000200000ull}}) == 6144ull * 1024);
  CHECK(anon_huge_bytes(smaps, {{0x7f1000000000ull, 0x7f1000200000ull}}) == 0);
}
