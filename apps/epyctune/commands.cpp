#include "apps/epyctune/commands.hpp"

#include <spdlog/spdlog.h>

namespace epyctune::cli {

std::vector<RegisterFn>& registry() {
  static std::vector<RegisterFn> fns;
  return fns;
}

stack::Session open_session(const GlobalOptions& g, const std::string& profile,
                            const std::string& steps, bool force) {
  spdlog::info("host root {}{}", g.sysroot,
               g.topology_xml.empty() ? "" : ", topology from " + g.topology_xml);
  auto s = stack::open_session({g.sysroot, g.topology_xml, profile, steps, force});
  spdlog::info("profile {} from {}; topology from {}", s.profile.name, s.profile.source_file,
               s.topo.source);
  for (const auto& m : s.mismatches) spdlog::warn("profile/host mismatch (forced): {}", m);
  spdlog::info("{} knob(s) in {} step(s)", s.knobs.size(), s.steps.size());
  return s;
}

}  // namespace epyctune::cli
