// Internal to lib/host: reading an lstopo XML export and saying why hwloc
// cannot load one. hwloc's own reasons go only to stderr, and only when
// HWLOC_XML_VERBOSE is set before its first XML import in the process.
#pragma once

#include <hwloc.h>

#include <functional>
#include <string>

namespace epyctune::host::detail {

// The file, after the checks every input file gets (exists, regular, size).
// Throws DiscoveryError naming the file and what to do.
std::string read_topology_xml(const std::string& path);

// Why `xml` is a format this hwloc cannot read ("" when nothing is known to
// be wrong): today, an export in hwloc 3's XML format.
std::string xml_format_problem(const std::string& xml);

// hwloc 2.9 crashes on some malformed exports (a NULL cpuset it then
// compares; lstopo 2.9 crashes on them too), and leaks what it had parsed of
// one it refuses. So an export is imported in a child process first, and in
// this process only when the child loaded it.
struct ImportTrial {
  bool loads = false;   // hwloc imported it
  std::string crashed;  // hwloc crashed on it: how
  std::string said;     // what hwloc printed, warnings about skipped attributes left out
};
ImportTrial try_import(const std::string& xml);

// Runs `fn` (hwloc calls on an XML source) with hwloc's XML verbosity on and
// stderr captured; returns fn's result and fills `said` with what hwloc
// printed, warnings about skipped attributes left out.
int capture_hwloc_messages(const std::function<int()>& fn, std::string& said);

}  // namespace epyctune::host::detail
