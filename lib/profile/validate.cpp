// Checks across keys, and against a host: what a single key's type and range
// cannot say. Each section brings its own (section.hpp); each error points at
// the key that has to change.
#include <algorithm>
#include <optional>

#include "host/capabilities.hpp"
#include "profile/loader.hpp"
#include "profile/schema.hpp"
#include "profile/section.hpp"

namespace epyctune::profile {

namespace {

void check_host(const Profile& p, const CheckHost& host, const std::vector<std::string>& only,
                Checker& c) {
  for (const Section* s : detail::sections())
    if (s->check_host && (only.empty() || std::count(only.begin(), only.end(), s->name)))
      s->check_host(p, host, c);
}

}  // namespace

void validate_profile(const Profile& p, const host::Topology* topo, const host::Sysroot* root) {
  Checker c(p);
  for (const Section* s : detail::sections())
    if (s->check) s->check(p, c);
  std::optional<host::ResctrlL3> l3;
  if (root) l3 = host::probe_resctrl_l3(*root, topo ? topo->cpu : host::CpuIdentity{});
  if (topo || l3) check_host(p, {topo, l3 ? &*l3 : nullptr}, {}, c);
  c.finish();
}

void validate_host(const Profile& p, const CheckHost& host,
                   const std::vector<std::string>& sections) {
  Checker c(p);
  check_host(p, host, sections, c);
  c.finish();
}

}  // namespace epyctune::profile
