#include "stack/privileges.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

namespace epyctune::stack {

namespace {

// Effective capability set of this process, from /proc/self/status (the real
// one: this is about us, not about the host being tuned).
uint64_t effective_caps() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("CapEff:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  return 0;
}

const std::map<std::string, int> kCapBits = {
    {"CAP_SYS_RAWIO", 17}, {"CAP_SYS_ADMIN", 21}, {"CAP_SYS_NICE", 23}};

}  // namespace

std::vector<std::string> missing_privileges(
    const host::Sysroot& sys, const std::vector<std::pair<std::string, std::string>>& needed) {
  std::vector<std::string> missing;
  if (!sys.is_live()) return missing;
  if (::geteuid() != 0) missing.push_back("root (sysfs, procfs and /etc writes)");
  uint64_t caps = effective_caps();
  std::map<std::string, std::string> seen;
  for (const auto& [cap, why] : needed) {
    auto bit = kCapBits.find(cap);
    if (bit == kCapBits.end() || (caps >> bit->second) & 1) continue;
    if (seen.emplace(cap, why).second) missing.push_back(fmt::format("{} ({})", cap, why));
  }
  return missing;
}

}  // namespace epyctune::stack
