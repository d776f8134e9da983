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

TEST_CASE("valid_utf8 keeps well-formed text and replaces each bad byte with U+FFFD") {
  using epyctune::common::valid_utf8;
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(valid_utf8("AMD EPYC 9754") == "AMD EPYC 9754");
  CHECK(valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") ==
        "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  CHECK(valid_utf8("a\xA9z") == "a" + fffd + "z");                     // stray continuation byte
  CHECK(valid_utf8("\xC3") == fffd);                                   // truncated at the end
  CHECK(valid_utf8("\xC0\xAF") == fffd + fffd);                        // overlong '/'
  CHECK(valid_utf8("\xED\xA0\x80") == fffd + fffd + fffd);             // a surrogate
  CHECK(valid_utf8("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd);  // past U+10FFFF
  CHECK(valid_utf8(std::string("a\0b", 3)) == std::string("a\0b", 3));
}
