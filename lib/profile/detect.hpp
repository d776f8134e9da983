// `epyctune detect`: what this host is, what it supports, which built-in
// profile fits and why (like `tuned-adm recommend`). JSON schema:
// docs/json/detect.md (schema_version below).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "host/capabilities.hpp"
#include "host/discover.hpp"
#include "profile/resolve.hpp"

namespace epyctune::profile {

inline constexpr int kDetectSchemaVersion = 1;

struct ProfileFit {
  std::string name;
  std::vector<std::string> aliases;
  MatchResult match;
};

struct DetectReport {
  host::Topology topology;
  host::Capabilities capabilities;
  bool capabilities_probed = true;  // false for a topology XML: there is no host to ask
  std::vector<ProfileFit> fits;     // every built-in, best first
  std::string recommended;          // "" when nothing fits
  std::string note;                 // the recommendation, or why nothing fits
  // Nothing fits an AMD host: the `epyctune profile generate` command for it.
  std::string generate_command;
};

DetectReport run_detect(const host::Sysroot& root, const host::DiscoverOptions& opt);
nlohmann::json detect_to_json(const DetectReport& r);
std::string detect_to_text(const DetectReport& r);

// `profile show`: every key with the file:line:col it came from.
nlohmann::json profile_to_json(const Profile& p);
std::string profile_to_text(const Profile& p);

}  // namespace epyctune::profile
