#include "stack_harness.hpp"

#include "profile/loader.hpp"
#include "profile/resolve.hpp"

namespace epyctune::testing {

profile::Profile stack_test_profile(const std::string& machine) {
  return profile::load_profile(machine == "7543-2s" ? "7543" : machine);
}

profile::HostPartition stack_test_partition(const profile::Profile& p, const host::Topology& t) {
  profile::require_match(p, t, false);
  return profile::resolve_partition(p, t);
}

}  // namespace epyctune::testing
