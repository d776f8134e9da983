// Internal to lib/profile: the profile schema, applied one TOML file at a time
// onto a Profile (a child file overrides what its include set).
#pragma once

#include <toml++/toml.h>

#include <string>
#include <string_view>
#include <vector>

#include "profile/loader.hpp"
#include "profile/profile.hpp"

namespace epyctune::profile {
struct Section;
}

namespace epyctune::profile::detail {

struct ApplyContext {
  std::string file;  // as shown in messages
  Profile& profile;
  std::vector<Diagnostic>& diags;
  bool outermost = true;  // identity keys (name, aliases, description) are not inherited
};

// Every section in file order: [hardware], [partition], the steps' by
// number, [engine]. [expectations] and the top level are read on their own.
std::vector<const Section*> sections();
// Every key of the schema except `include`, which the loader handles.
void apply_table(const toml::table& root, ApplyContext& ctx);

// One TOML table as a KeyReader (section.hpp) reads it.
struct TableState {
  const toml::table& table;
  std::string section;  // dotted prefix of its keys ("" at the top level)
  ApplyContext& ctx;
};

// "a string", "an integer", ... for messages.
const char* type_name(const toml::node& n);

// A value as messages quote it: control characters escaped, a hostile
// megabyte cut to its start.
std::string shown(std::string_view v, char quote = '"');

Diagnostic diag_at(const toml::source_region& where, const std::string& file, std::string what,
                   std::string fix);

// Names (profile names, aliases, resctrl groups, path components) are
// kept to a charset that is inert in file names, shell words and boot loader
// config, and to a length no message or journal line suffers from.
inline constexpr size_t kMaxIdentifier = 64;
inline constexpr size_t kMaxPath = 255;
// Why `v` is not a name: "" when it is. Starts with a letter or digit, then
// A-Z a-z 0-9 . _ -, at most kMaxIdentifier.
std::string identifier_problem(std::string_view v);
// Why `v` is not an absolute path of such names ("" when it is), directly in
// `dir` when dir is not empty, ending in `ext` when ext is not empty.
std::string path_problem(std::string_view v, std::string_view dir, std::string_view ext);

// The [expectations] keys with a figure: "baseline", each measured step's
// name, "roofline".
std::vector<std::string> expectation_keys();

}  // namespace epyctune::profile::detail
