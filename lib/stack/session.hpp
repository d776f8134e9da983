// What every stack command starts from: the host (sysroot + discovered or
// exported topology), the profile matched against it, the resolved partition,
// and the knobs of the selected steps.
#pragma once

#include <string>
#include <vector>

#include "host/capabilities.hpp"
#include "host/sysroot.hpp"
#include "host/topology.hpp"
#include "profile/profile.hpp"
#include "profile/resolve.hpp"
#include "stack/knob.hpp"

namespace epyctune::stack {

struct SessionOptions {
  std::string sysroot = "/";
  std::string topology_xml;
  std::string profile;  // built-in name/alias or a TOML file
  std::string steps;    // "" = all
  bool force = false;   // plan/apply despite a profile/host mismatch
};

struct Session {
  host::Sysroot sys;
  host::Topology topo;
  profile::Profile profile;
  profile::HostPartition part;
  std::vector<int> steps;
  std::vector<Knob> knobs;
  std::vector<std::string> mismatches;  // what --force overrode
  std::string partition_error;          // forced: why the partition could not be resolved
  host::Capabilities caps;              // host facts, probed once; the knobs' ctx points here
};

// Throws profile::ProfileError, host::DiscoveryError or std::invalid_argument
// (bad --steps) with a message naming the input; never writes.
Session open_session(const SessionOptions& opts);

}  // namespace epyctune::stack
