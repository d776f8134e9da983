#include "stack/privileges.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <map>

#include "host/capabilities.hpp"

namespace epyctune::stack {

namespace {

const std::map<std::string, int> kCapBits = {
    {"CAP_SYS_RAWIO", 17}, {"CAP_SYS_ADMIN", 21}, {"CAP_SYS_NICE", 23}};

}  // namespace

std::vector<std::string> missing_privileges(
    const host::Sysroot& sys, const std::vector<std::pair<std::string, std::string>>& needed) {
  std::vector<std::string> missing;
  if (!sys.is_live()) return missing;
  if (::geteuid() != 0) missing.push_back("root (sysfs, procfs and /etc writes)");
  uint64_t caps = host::effective_capabilities();
  std::map<std::string, std::string> seen;
  for (const auto& [cap, why] : needed) {
    auto bit = kCapBits.find(cap);
    if (bit == kCapBits.end() || (caps >> bit->second) & 1) continue;
    if (seen.emplace(cap, why).second) missing.push_back(fmt::format("{} ({})", cap, why));
  }
  return missing;
}

}  // namespace epyctune::stack
