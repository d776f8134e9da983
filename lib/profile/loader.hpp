// Loading profiles: built-in (embedded in the binary from profiles/*.toml, by
// name or short alias: "9754", "epyc-9754") or a user's file by path, with
// `include = "base"` inheritance, strict keys and ranges. Every problem is
// reported as "file:line:column: what; fix".
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "host/capabilities.hpp"
#include "host/sysroot.hpp"
#include "host/topology.hpp"
#include "profile/profile.hpp"

namespace epyctune::profile {

struct CheckHost;  // section.hpp

struct Diagnostic {
  std::string file;
  int line = 0;  // 0 when there is no position (e.g. a missing file)
  int column = 0;
  std::string what;
  std::string fix;
  std::string str() const;  // "file:line:column: what; fix"
};

class ProfileError : public std::runtime_error {
 public:
  explicit ProfileError(std::vector<Diagnostic> diagnostics);
  ProfileError(std::string file, int line, int column, std::string what, std::string fix);
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }

 private:
  std::vector<Diagnostic> diags_;
};

// Where an administrator's profiles live (under the sysroot). NAME.toml there
// replaces the built-in NAME, as /etc/tuned does for tuned's profiles.
inline constexpr const char* kProfileOverrideDir = "/etc/epyctune/profiles";

// A built-in name or alias, or a path to a TOML file (anything containing '/'
// or ending in ".toml", or an existing file). With a sysroot, a name is first
// looked up in its kProfileOverrideDir as NAME.toml (a built-in's alias by the
// built-in's name). Runs the host-independent validation.
// Throws ProfileError with every problem found.
Profile load_profile(std::string_view name_or_path, const host::Sysroot* root = nullptr);

// Parses a profile from text as if it were the file `display_name` (includes
// resolve relative to its directory). For tests and `profile validate`.
Profile load_profile_text(std::string_view text, const std::string& display_name);

// The machine profiles built in ("epyc-7543-2s", "epyc-9354", "epyc-9754"), sorted.
std::vector<std::string> list_profiles();

struct ProfileListing {
  std::string name;                // what --profile takes
  std::string file;                // the override file; empty for a plain built-in
  bool overrides_builtin = false;  // file replaces the built-in of this name
  std::string ignored;             // why file is never loaded (named after an alias)
};
// Every profile --profile NAME can load with this sysroot: the built-ins and
// the override directory's *.toml, sorted by name.
std::vector<ProfileListing> list_profile_sources(const host::Sysroot* root);

// The TOML text of a built-in profile (by name or alias); throws ProfileError if unknown.
std::string builtin_profile_text(std::string_view name);

// Checks that need no host were done by load_profile. With a topology, also:
// L3 domain indices and housekeeping cores/CPUs exist, the partition leaves
// draft and verify CPUs, hugepages fit each node's memory. With a sysroot,
// also: CAT masks fit info/L3/cbm_mask and min_cbm_bits (when resctrl is
// mounted). Throws ProfileError pointing at the offending key.
void validate_profile(const Profile& p, const host::Topology* host_or_null,
                      const host::Sysroot* root_or_null = nullptr);

// The checks of the sections named in `sections` (every section when empty)
// against what is known of a host (section.hpp): the CAT masks against
// resctrl's rules (within info/L3/cbm_mask, at least min_cbm_bits, contiguous
// unless sparse_masks, and 3 CLOSIDs), hugepages against each node's memory.
// Throws ProfileError pointing at the offending key.
void validate_host(const Profile& p, const CheckHost& host,
                   const std::vector<std::string>& sections = {});

// Levenshtein distance, for "did you mean" suggestions.
int edit_distance(std::string_view a, std::string_view b);
// The closest candidate within a sensible distance, or "".
std::string closest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace epyctune::profile
