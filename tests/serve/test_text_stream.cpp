// Stop strings and UTF-8 boundaries in streamed text.
#include <doctest/doctest.h>

#include "engine/serving/text_stream.hpp"

using namespace epyctune::engine::serving;

TEST_CASE("without stops every complete character goes out at once") {
  TextStream t;
  CHECK(t.push("ab") == "ab");
  CHECK(t.push("\xe2\x82") == "");  // the first two bytes of the euro sign
  CHECK(t.push("\xac!") == "\xe2\x82\xac!");
  CHECK(t.finish().empty());
  CHECK(!t.stopped());
}

TEST_CASE("a stop string cuts the text, even across pieces") {
  TextStream t({"END", "\n\n"});
  CHECK(t.push("hello E") == "hello ");  // "E" may begin END
  CHECK(t.push("N") == "");
  CHECK(t.push("Dafter") == "");
  CHECK(t.stopped());
  CHECK(t.push("more") == "");
  CHECK(t.finish().empty());

  TextStream u({"END"});
  CHECK(u.push("EN") == "");
  CHECK(u.push("x") == "ENx");  // not a stop after all
  CHECK(u.push("E") == "");
  CHECK(u.finish() == "E");  // the end releases what was held
}

TEST_CASE("the concatenated deltas are the whole text") {
  const std::string pieces[] = {"The", " quick", " \xc3", "\xa9", "tude", " STO", "P here"};
  TextStream s({"STOP"});
  std::string streamed;
  for (const auto& p : pieces) streamed += s.push(p);
  streamed += s.finish();
  CHECK(streamed == "The quick \xc3\xa9tude ");
  CHECK(incomplete_utf8_tail("a\xf0\x9f\x98") == 3);
  CHECK(incomplete_utf8_tail("a\xf0\x9f\x98\x80") == 0);
  CHECK(incomplete_utf8_tail("\x80") == 0);
}
