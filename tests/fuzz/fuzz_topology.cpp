// libFuzzer target: the topology loader (hwloc's XML import, then our reading
// of sockets, NUMA nodes, L3 domains and cores) and the `detect` report on
// arbitrary XML. Anything but a clean DiscoveryError is a finding.
#include <cstdlib>
#include <string>

#include "host/discover.hpp"
#include "host/json.hpp"
#include "profile/detect.hpp"

using namespace epyctune;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string xml(reinterpret_cast<const char*>(data), size);
  profile::DetectReport r;
  try {
    r.topology = host::discover_xml_text(xml, "fuzz.xml");
  } catch (const host::DiscoveryError&) {
    return 0;
  }
  const auto& t = r.topology;
  for (const auto& c : t.cores)
    if (c.l3 < 0 || static_cast<size_t>(c.l3) >= t.l3_domains.size()) std::abort();
  r.capabilities_probed = false;
  r.capabilities = host::capabilities_unknown("fuzzing");
  for (const auto& name : profile::list_profiles()) {
    auto p = profile::load_profile(name);
    r.fits.push_back({p.name, p.aliases, profile::match_profile(p, t)});
  }
  (void)profile::detect_to_text(r);
  (void)profile::detect_to_json(r).dump();
  return 0;
}
