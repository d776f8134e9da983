// The profiles/*.toml files, embedded at build time (embed_profiles.cmake
// generates builtin_profiles.cpp), so `--profile 9754` works from anywhere.
#pragma once

#include <span>
#include <string_view>

namespace epyctune::profile {

struct BuiltinProfile {
  std::string_view file;  // "epyc-9754.toml"
  std::string_view text;
};

std::span<const BuiltinProfile> builtin_profiles();

}  // namespace epyctune::profile
