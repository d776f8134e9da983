// /proc/<pid>/numa_maps: where the pages of our weight mappings really are.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace epyctune::engine::runtime {

struct NumaMapsEntry {
  uint64_t start = 0;             // VMA start address
  std::string policy;             // "default", "interleave:0-1", "bind:0", ...
  std::string file;               // file= value, empty for anonymous
  uint64_t page_size = 4096;      // kernelpagesize_kB * 1024
  bool huge = false;              // "huge" token (hugetlbfs)
  std::map<int, uint64_t> pages;  // node -> pages (N<node>=<pages>)
};

// Parses numa_maps text; malformed lines throw std::runtime_error with the line number.
std::vector<NumaMapsEntry> parse_numa_maps(std::string_view text);

struct AddressRange {
  uint64_t begin = 0, end = 0;  // [begin, end)
};

struct Placement {
  std::map<int, uint64_t> bytes_per_node;  // resident bytes of the ranges, per node
  std::vector<std::string> policies;       // distinct policies seen on those VMAs
  uint64_t page_size = 0;                  // largest page size seen
  uint64_t total_bytes() const;
  std::string summary() const;  // "node0 3.61 GiB (100%), pages 2 MiB, policy default"
};

// Sums the entries whose VMA starts inside one of the ranges (numa_maps lists
// VMA starts only; mbind splits a mapping into one VMA per policy range).
Placement placement_of(const std::vector<NumaMapsEntry>& entries,
                       const std::vector<AddressRange>& ranges);

// /proc/<pid>/smaps: the AnonHugePages (transparent hugepages actually
// granted) of the mappings that overlap the ranges. numa_maps shows THP-backed
// memory with kernelpagesize_kB=4, so this is where THP coverage is visible.
uint64_t anon_huge_bytes(std::string_view smaps_text, const std::vector<AddressRange>& ranges);
uint64_t read_self_anon_huge_bytes(const std::vector<AddressRange>& ranges, std::string& err);

// Reads /proc/self/numa_maps (absent without NUMA support: returns empty and
// sets err).
std::vector<NumaMapsEntry> read_self_numa_maps(std::string& err);

}  // namespace epyctune::engine::runtime
