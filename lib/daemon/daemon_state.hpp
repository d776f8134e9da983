// What one config turns into: the config, the stack session it opens, the
// launch plan and the instances carved from it. Private to the daemon.
#pragma once

#include <vector>

#include "daemon/config.hpp"
#include "daemon/daemon.hpp"
#include "daemon/instances.hpp"
#include "launch/launch_config.hpp"
#include "stack/session.hpp"

namespace epyctune::daemon {

struct Daemon::Loaded {
  Config cfg;
  stack::Session session;
  launch::LaunchPlan plan;
  std::vector<InstancePlan> instances;
};

}  // namespace epyctune::daemon
