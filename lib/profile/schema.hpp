// Internal to lib/profile: the profile schema, applied one TOML file at a time
// onto a Profile (a child file overrides what its include set).
#pragma once

#include <toml++/toml.h>

#include <string>
#include <vector>

#include "profile/loader.hpp"
#include "profile/profile.hpp"

namespace epyctune::profile::detail {

struct ApplyContext {
  std::string file;  // as shown in messages
  Profile& profile;
  std::vector<Diagnostic>& diags;
  bool outermost = true;  // identity keys (name, aliases, description) are not inherited
};

// Every key of the schema except `include`, which the loader handles.
void apply_table(const toml::table& root, ApplyContext& ctx);

Diagnostic diag_at(const toml::source_region& where, const std::string& file, std::string what,
                   std::string fix);

// Step names valid as [expectations] keys.
const std::vector<std::string>& expectation_keys();

}  // namespace epyctune::profile::detail
