#include "bench/bandwidth_probe.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "common/cpulist.hpp"
#include "engine/runtime/bandwidth.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/runtime/thread_pool.hpp"

namespace epyctune::bench {

namespace fs = std::filesystem;

std::vector<CpuGroup> node_groups(const fs::path& root) {
  std::map<int, std::vector<int>> nodes;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root / "sys/devices/system/node", ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("node", 0) != 0 || n.size() == 4) continue;
    int id = -1;
    try {
      id = std::stoi(n.substr(4));
    } catch (...) {
      continue;
    }
    std::ifstream f(e.path() / "cpulist");
    std::string list;
    std::getline(f, list);
    auto cpus = common::parse_cpulist(list);
    if (!cpus.empty()) nodes[id] = cpus;
  }
  std::vector<CpuGroup> out;
  for (auto& [id, cpus] : nodes) out.push_back({fmt::format("node {}", id), cpus});
  return out;
}

std::vector<CpuGroup> l3_groups(const fs::path& root) {
  std::map<int, std::vector<int>> doms;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root / "sys/devices/system/cpu", ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("cpu", 0) != 0 || n.size() == 3 ||
        !std::all_of(n.begin() + 3, n.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    std::ifstream f(e.path() / "cache/index3/id");
    int id = -1;
    if (f >> id && id >= 0) doms[id].push_back(std::stoi(n.substr(3)));
  }
  std::vector<CpuGroup> out;
  for (auto& [id, cpus] : doms) {
    std::sort(cpus.begin(), cpus.end());
    out.push_back({fmt::format("L3 {}", id), cpus});
  }
  return out;
}

namespace {
// The pool pins its caller as worker 0; the caller's affinity is put back
// afterwards, since the engine processes it starts later inherit it.
class AffinityGuard {
 public:
  AffinityGuard() { ok_ = sched_getaffinity(0, sizeof set_, &set_) == 0; }
  ~AffinityGuard() {
    if (ok_) sched_setaffinity(0, sizeof set_, &set_);
  }
  AffinityGuard(const AffinityGuard&) = delete;
  AffinityGuard& operator=(const AffinityGuard&) = delete;

 private:
  cpu_set_t set_{};
  bool ok_ = false;
};
}  // namespace

double probe_cpus(const std::vector<int>& cpus, size_t mib, int repeats) {
  AffinityGuard keep;
  engine::runtime::ThreadPool pool(cpus, true);
  return engine::runtime::measure_read_bandwidth(pool, mib << 20, repeats).median_gbps;
}

GroupBandwidth probe_group(const CpuGroup& g, size_t mib, int repeats) {
  GroupBandwidth r;
  r.group = g;
  const auto allowed = engine::runtime::allowed_cpus();
  for (int c : g.cpus)
    if (std::find(allowed.begin(), allowed.end(), c) != allowed.end()) r.probed_cpus.push_back(c);
  if (r.probed_cpus.empty()) {
    r.unsupported = fmt::format("none of CPUs {} may run this process (allowed: {})",
                                common::format_cpulist(g.cpus), common::format_cpulist(allowed));
    return r;
  }
  AffinityGuard keep;
  engine::runtime::ThreadPool pool(r.probed_cpus, true);
  auto bw = engine::runtime::measure_read_bandwidth(pool, mib << 20, repeats);
  r.median_gbps = bw.median_gbps;
  r.min_gbps = bw.min_gbps;
  r.max_gbps = bw.max_gbps;
  return r;
}

}  // namespace epyctune::bench
