#include <doctest/doctest.h>

#include "common/text.hpp"

using epyctune::common::trim;

TEST_CASE("trim removes blanks at both ends and nothing inside") {
  CHECK(trim("  0-3,8\n") == "0-3,8");
  CHECK(trim("\t[weights]\r\n") == "[weights]");
  CHECK(trim("a b") == "a b");
  CHECK(trim(" \n\t") == "");
  CHECK(trim("") == "");
}
