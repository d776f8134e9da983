// JSON views of discovery results, as `epyctune detect --json` prints them
// (docs/json/detect.md documents every key). CPU lists are kernel list strings.
#pragma once

#include <nlohmann/json.hpp>

#include "host/capabilities.hpp"
#include "host/topology.hpp"

namespace epyctune::host {

nlohmann::json cpu_to_json(const CpuIdentity& cpu);
nlohmann::json topology_to_json(const Topology& t);
nlohmann::json capabilities_to_json(const Capabilities& c);
// Every capability unsupported with the same reason (e.g. a topology from XML: no host to ask).
Capabilities capabilities_unknown(const std::string& reason);

}  // namespace epyctune::host
