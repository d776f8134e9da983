#include "engine/runtime/weight_memory.hpp"

#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/field_error.hpp"

namespace epyctune::engine::runtime {
namespace {
constexpr size_t kHuge = size_t{2} << 20;
size_t round_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}
}  // namespace

const char* page_kind_name(PageKind k) {
  switch (k) {
    case PageKind::file_mmap:
      return "file-mmap";
    case PageKind::small:
      return "4k";
    case PageKind::thp:
      return "thp";
    case PageKind::hugetlb:
      return "hugetlb-2M";
    case PageKind::shared:
      return "shared-file";
  }
  return "?";
}

const char* numa_policy_name(NumaPolicy p) {
  switch (p) {
    case NumaPolicy::none:
      return "none";
    case NumaPolicy::interleave:
      return "interleave";
    case NumaPolicy::split:
      return "split";
    case NumaPolicy::local:
      return "local";
  }
  return "?";
}

NumaPolicy parse_numa_policy(std::string_view s) {
  if (s == "none") return NumaPolicy::none;
  if (s == "interleave") return NumaPolicy::interleave;
  if (s == "split") return NumaPolicy::split;
  if (s == "local") return NumaPolicy::local;
  throw common::FieldError("numa",
                           "'" + std::string(s) + "': expected none, interleave, split or local");
}

WeightMemory WeightMemory::allocate(size_t bytes, bool want_huge) {
  WeightMemory m;
  size_t len = round_up(std::max<size_t>(bytes, 1), kHuge);
  if (want_huge) {
    // Without MAP_NORESERVE the kernel reserves the pages now, so a short
    // pool fails here instead of SIGBUS on first touch.
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB,
                   -1, 0);
    if (p != MAP_FAILED) {
      m.base_ = static_cast<uint8_t*>(p);
      m.len_ = len;
      m.kind_ = PageKind::hugetlb;
      return m;
    }
    m.fallback_ = std::string("MAP_HUGETLB failed (") + std::strerror(errno) +
                  "): reserve 2 MiB pages in /proc/sys/vm/nr_hugepages; using THP";
  }
  // Over-map by 2 MiB so the base can be 2 MiB aligned (THP needs aligned extents).
  size_t map_len = len + kHuge;
  void* p = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw std::runtime_error("weight memory: cannot map " + std::to_string(len) +
                             " bytes: " + std::strerror(errno));
  auto addr = reinterpret_cast<uintptr_t>(p);
  uintptr_t aligned = round_up(addr, kHuge);
  if (aligned > addr) munmap(p, aligned - addr);
  uintptr_t end = aligned + len;
  if (addr + map_len > end) munmap(reinterpret_cast<void*>(end), addr + map_len - end);
  m.base_ = reinterpret_cast<uint8_t*>(aligned);
  m.len_ = len;
  m.kind_ = PageKind::small;
  // Always ask for THP: a 7B model in 4 KiB pages is a million page faults at
  // load (seconds in a VM) and a TLB miss every 4 KiB of every pass.
  if (madvise(m.base_, len, MADV_HUGEPAGE) == 0) {
    m.kind_ = PageKind::thp;
  } else {
    m.fallback_ += std::string(m.fallback_.empty() ? "" : "; ") +
                   "madvise(MADV_HUGEPAGE) failed (" + std::strerror(errno) + "): 4 KiB pages";
  }
  return m;
}

WeightMemory::WeightMemory(WeightMemory&& o) noexcept
    : base_(o.base_), len_(o.len_), kind_(o.kind_), fallback_(std::move(o.fallback_)) {
  o.base_ = nullptr;
  o.len_ = 0;
}

WeightMemory& WeightMemory::operator=(WeightMemory&& o) noexcept {
  if (this != &o) {
    if (base_) munmap(base_, len_);
    base_ = o.base_;
    len_ = o.len_;
    kind_ = o.kind_;
    fallback_ = std::move(o.fallback_);
    o.base_ = nullptr;
    o.len_ = 0;
  }
  return *this;
}

WeightMemory::~WeightMemory() {
  if (base_) munmap(base_, len_);
}

WeightMemory WeightMemory::adopt(uint8_t* base, size_t len, PageKind kind) {
  WeightMemory m;
  m.base_ = base;
  m.len_ = len;
  m.kind_ = kind;
  return m;
}

bool WeightMemory::bind(size_t offset, size_t len, NumaPolicy policy, const std::vector<int>& nodes,
                        std::string& err) {
  return bind_pages(base_, len_, kind_ == PageKind::hugetlb ? kHuge : 4096, offset, len, policy,
                    nodes, err);
}

bool bind_pages(uint8_t* base, size_t map_len, size_t page, size_t offset, size_t len,
                NumaPolicy policy, const std::vector<int>& nodes_in, std::string& err) {
  if (policy == NumaPolicy::none || len == 0) return true;
  if (numa_available() < 0) {
    err = "unsupported: no NUMA support in this kernel (numa_available() < 0)";
    return false;
  }
  std::vector<int> nodes = nodes_in.empty() ? memory_nodes() : nodes_in;
  size_t b = round_up(offset, page), e = std::min(map_len, (offset + len) / page * page);
  if (e <= b) return true;
  unsigned long maxnode = 1;
  for (int n : nodes) maxnode = std::max<unsigned long>(maxnode, static_cast<unsigned long>(n) + 1);
  std::vector<unsigned long> mask((maxnode + 63) / 64 + 1, 0);
  for (int n : nodes) mask[n / 64] |= 1ul << (n % 64);
  // Several nodes: round-robin pages over them; one node: bind to it. Called
  // before the range is touched, so first touch places every page.
  int mode = nodes.size() > 1 ? MPOL_INTERLEAVE : MPOL_BIND;
  if (::mbind(base + b, e - b, mode, mask.data(), maxnode + 1, 0) != 0) {
    err = std::string("mbind failed: ") + std::strerror(errno);
    return false;
  }
  return true;
}

std::vector<int> memory_nodes() {
  std::vector<int> out;
  if (numa_available() < 0) return {0};
  struct bitmask* m = numa_get_mems_allowed();
  for (int n = 0; n <= numa_max_node(); ++n)
    if (numa_bitmask_isbitset(m, n)) out.push_back(n);
  numa_bitmask_free(m);
  if (out.empty()) out.push_back(0);
  return out;
}

std::vector<int> nodes_of_cpus(const std::vector<int>& cpus) {
  std::vector<int> out;
  if (numa_available() < 0) return {0};
  for (int c : cpus) {
    int n = numa_node_of_cpu(c);
    if (n >= 0 && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  if (out.empty()) out.push_back(0);
  return out;
}

std::vector<int> cpus_on_this_node(const std::vector<int>& cpus, int& node) {
  node = nodes_of_cpus({sched_getcpu()}).front();
  std::vector<int> out;
  for (int c : cpus)
    if (nodes_of_cpus({c}).front() == node) out.push_back(c);
  return out;
}

}  // namespace epyctune::engine::runtime
