// A private fixture host plus everything the stack needs to run on it:
// topology (discovered from the tree), profile, resolved partition, knobs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "../fixture/fixture_cache.hpp"
#include "host/discover.hpp"
#include "stack/steps.hpp"

namespace epyctune::testing {

// The built-in profile for a fixture machine, and its partition on the fixture.
profile::Profile stack_test_profile(const std::string& machine);
profile::HostPartition stack_test_partition(const profile::Profile& p, const host::Topology& t);

struct StackHost {
  ScratchDir dir;
  host::Sysroot sys{"/nonexistent"};
  host::Topology topo;
  profile::Profile profile;
  profile::HostPartition part;

  explicit StackHost(const std::string& machine, fixture::FixtureOptions opt = {}) {
    if (opt.machine.empty()) opt.machine = machine;
    if (opt.nps == 0) opt.nps = 1;
    fixture::create_fixture(dir.path(), opt);
    sys = host::Sysroot(dir.path());
    topo = host::discover(sys);
    profile = stack_test_profile(machine);
    part = stack_test_partition(profile, topo);
  }
  std::vector<stack::Knob> knobs(const std::string& steps = "") const {
    stack::StepContext ctx{sys, profile, topo, part, ""};
    return stack::build_knobs(ctx, stack::parse_steps(steps));
  }
};

}  // namespace epyctune::testing
