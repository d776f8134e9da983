#include "engine/runtime/cpus.hpp"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <string>

#include "common/cpulist.hpp"

namespace epyctune::engine::runtime {

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {0};
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

std::vector<int> parse_cpus(std::string_view spec) {
  std::vector<int> cpus;
  try {
    cpus = common::parse_cpulist(spec);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("'" + std::string(spec) + "': " + e.what());
  }
  if (cpus.empty()) throw std::invalid_argument("'" + std::string(spec) + "': no CPU listed");
  if (auto why = unusable_cpus(cpus); !why.empty()) throw std::invalid_argument(why);
  return cpus;
}

std::string unusable_cpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return "no CPU listed";
  const auto allowed = allowed_cpus();
  for (int c : cpus)
    if (std::find(allowed.begin(), allowed.end(), c) == allowed.end())
      return "CPU " + std::to_string(c) +
             " is not available to this process (allowed: " + common::format_cpulist(allowed) + ")";
  return "";
}

std::vector<int> first_cpus(int n) {
  auto allowed = allowed_cpus();
  if (n <= 0 || n >= static_cast<int>(allowed.size())) {
    if (n > static_cast<int>(allowed.size())) {
      // More threads than CPUs: oversubscribe round-robin (unpinned use only).
      std::vector<int> out;
      for (int i = 0; i < n; ++i) out.push_back(allowed[i % allowed.size()]);
      return out;
    }
    return allowed;
  }
  allowed.resize(n);
  return allowed;
}

std::vector<int> l3_ids(const std::vector<int>& cpus, const std::filesystem::path& root) {
  std::vector<int> out;
  for (int c : cpus) {
    int id = -1;
    std::ifstream f(root / "sys/devices/system/cpu" / ("cpu" + std::to_string(c)) /
                    "cache/index3/id");
    if (!(f >> id) || id < 0) id = -1;  // unknown topology, never a guess
    out.push_back(id);
  }
  return out;
}

}  // namespace epyctune::engine::runtime
