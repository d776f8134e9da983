// Helpers for the profile tests.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "profile/loader.hpp"

namespace epyctune::testing {

// The first diagnostic of a load that must fail.
inline profile::Diagnostic first_error(const std::string& text,
                                       const std::string& name = "user.toml") {
  try {
    profile::load_profile_text(text, name);
  } catch (const profile::ProfileError& e) {
    REQUIRE(!e.diagnostics().empty());
    return e.diagnostics().front();
  }
  FAIL("expected a ProfileError");
  return {};
}

}  // namespace epyctune::testing
