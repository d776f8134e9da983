// Host discovery: hwloc for the topology (live, a sysroot through
// HWLOC_FSROOT, or an lstopo XML export), CPU identity from CPUID/libcpuid or
// the sysroot's /proc/cpuinfo, memory per node from sysfs (via hwloc).
// Read-only: discovery never writes host state.
#pragma once

#include <stdexcept>
#include <string>

#include "host/sysroot.hpp"
#include "host/topology.hpp"

namespace epyctune::host {

class DiscoveryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DiscoverOptions {
  std::string topology_xml;  // non-empty: read this lstopo XML instead of the host
};

// Sysroot "/" = live. Another root: hwloc reads that tree only (its x86 CPUID
// backend is disabled, it would describe the CPU we run on). Throws
// DiscoveryError naming the source when hwloc cannot load it.
Topology discover(const Sysroot& root, const DiscoverOptions& options = {});

// An lstopo XML export already in memory; `name` is what messages and
// Topology::source call it. For fuzzing and tests; discover() reads files.
Topology discover_xml_text(const std::string& xml, const std::string& name);

}  // namespace epyctune::host
