#include "stack/privileges.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>

#include "host/capabilities.hpp"

namespace epyctune::stack {

namespace {

const std::map<std::string, int> kCapBits = {
    {"CAP_SYS_RAWIO", 17}, {"CAP_SYS_ADMIN", 21}, {"CAP_SYS_NICE", 23}};

std::function<ProcessPrivileges()>& source() {
  static std::function<ProcessPrivileges()> s;
  return s;
}

}  // namespace

void set_privileges_source(std::function<ProcessPrivileges()> s) {
  source() = std::move(s);
}

std::vector<std::string> missing_privileges(
    const host::Sysroot& sys, const std::vector<std::pair<std::string, std::string>>& needed,
    const std::string& root_for) {
  std::vector<std::string> missing;
  ProcessPrivileges have;
  if (source()) {
    have = source()();
  } else {
    if (!sys.is_live()) return missing;
    have = {::geteuid() == 0, host::effective_capabilities()};
  }
  if (!have.root)
    missing.push_back(
        fmt::format("root ({})", root_for.empty() ? "sysfs, procfs and /etc writes" : root_for));
  std::map<std::string, std::string> seen;
  for (const auto& [cap, why] : needed) {
    auto bit = kCapBits.find(cap);
    if (bit == kCapBits.end() || (have.capabilities >> bit->second) & 1) continue;
    if (seen.emplace(cap, why).second) missing.push_back(fmt::format("{} ({})", cap, why));
  }
  return missing;
}

void check_pretended_read(const host::Sysroot& sys, const std::string& host_path) {
  if (!source() || source()().root) return;
  struct stat st {};
  if (::stat(sys.resolve(host_path).c_str(), &st) != 0) return;
  if ((st.st_mode & S_IROTH) == 0)
    throw host::HostError("open", sys.resolve(host_path).string(), EACCES);
}

}  // namespace epyctune::stack
