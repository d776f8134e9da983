// Memory for model weights: optional copy out of the file mapping into
// hugepage-backed anonymous memory, placed on NUMA nodes with mbind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace epyctune::engine::runtime {

enum class PageKind {
  file_mmap,  // weights used in place from the GGUF mapping (no copy)
  small,      // anonymous 4 KiB pages
  thp,        // anonymous, madvise(MADV_HUGEPAGE): transparent hugepages if the kernel grants them
  hugetlb,    // MAP_HUGETLB 2 MiB pages from the reserved pool (or a hugetlbfs store file)
  shared,     // a read-only MAP_SHARED mapping of a shared weights store file (tmpfs, disk)
};
const char* page_kind_name(PageKind k);

enum class NumaPolicy {
  none,        // kernel default (first touch)
  interleave,  // every weight page round-robin over the nodes
  split,       // layer l on nodes[l * n_nodes / n_layers]: each node holds a contiguous group
  local,       // bound to the NUMA nodes of the pool's CPUs
};
const char* numa_policy_name(NumaPolicy p);
NumaPolicy parse_numa_policy(std::string_view s);  // "none|interleave|split|local"; throws

// mbind [offset, offset+len) of the mapping [base, base+map_len), shrunk to
// whole pages of `page` bytes, before it is touched. nodes empty = all nodes
// with memory. Returns false with `err` set when the kernel refuses (no NUMA
// support, node not allowed): placement is advisory.
bool bind_pages(uint8_t* base, size_t map_len, size_t page, size_t offset, size_t len,
                NumaPolicy policy, const std::vector<int>& nodes, std::string& err);

// An anonymous mapping of at least `bytes`, 2 MiB aligned, or a mapping
// adopted from elsewhere (a shared store file).
class WeightMemory {
 public:
  // want_huge: try MAP_HUGETLB first; otherwise (or when that fails) THP via madvise.
  static WeightMemory allocate(size_t bytes, bool want_huge);
  // Takes ownership of an mmap()ed range: munmap()ed on destruction.
  static WeightMemory adopt(uint8_t* base, size_t len, PageKind kind);
  WeightMemory() = default;
  WeightMemory(WeightMemory&& o) noexcept;
  WeightMemory& operator=(WeightMemory&& o) noexcept;
  ~WeightMemory();

  uint8_t* data() const { return base_; }
  size_t size() const { return len_; }
  PageKind kind() const { return kind_; }
  // Why hugetlb was not used (empty when it was or was not asked for).
  const std::string& fallback_reason() const { return fallback_; }

  // mbind [offset, offset+len) (page-aligned inside) before it is touched.
  // nodes empty = all nodes with memory. Returns false with `err` set when the
  // kernel refuses (no NUMA support, node not allowed): placement is advisory.
  bool bind(size_t offset, size_t len, NumaPolicy policy, const std::vector<int>& nodes,
            std::string& err);

 private:
  uint8_t* base_ = nullptr;
  size_t len_ = 0;
  PageKind kind_ = PageKind::small;
  std::string fallback_;
};

// NUMA nodes whose memory this process may use (libnuma); {0} without NUMA.
std::vector<int> memory_nodes();
// The node of each CPU (libnuma), deduplicated and sorted.
std::vector<int> nodes_of_cpus(const std::vector<int>& cpus);
// Those of `cpus` on the node of the CPU the calling thread runs on now
// (llama.cpp's --numa isolate); `node` receives that node.
std::vector<int> cpus_on_this_node(const std::vector<int>& cpus, int& node);

}  // namespace epyctune::engine::runtime
