#include <doctest/doctest.h>

#include <string>

#include "control/protocol.hpp"

using namespace epyctune::control;
using nlohmann::json;

namespace {

// The code parse_request throws for `line`, "" when it accepts it.
std::string refusal(std::string_view line) {
  try {
    parse_request(line);
    return "";
  } catch (const ProtocolError& e) {
    return e.code();
  }
}

}  // namespace

TEST_CASE("parse_request accepts the protocol's shapes") {
  auto r = parse_request(R"({"method":"status"})");
  CHECK(r.method == "status");
  CHECK(r.id.is_null());
  CHECK(r.params == json::object());

  r = parse_request(R"({"id":7,"method":"apply","params":{"profile":"x","check":true}})");
  CHECK(r.id == 7);
  CHECK(r.params["profile"] == "x");
  CHECK(parse_request(R"({"id":"abc","method":"engine.stop","params":{}})").id == "abc");
  CHECK(parse_request(R"({"id":null,"method":"verify"})").id.is_null());
  CHECK(parse_request(R"(  {"method" : "plan"}  )").method == "plan");
  CHECK(parse_request(R"({"id":1.5,"method":"plan"})").id == 1.5);
}

TEST_CASE("parse_request refuses with every error code") {
  CHECK(refusal("") == code::parse_error);
  CHECK(refusal("{") == code::parse_error);
  CHECK(refusal("garbage") == code::parse_error);
  CHECK(refusal(std::string("\0\0\0", 3)) == code::parse_error);
  CHECK(refusal(std::string("{\"method\":\"sta\0tus\"}", 20)) == code::parse_error);
  CHECK(refusal("{\"method\":\"\xff\xfe\"}") == code::parse_error);  // not UTF-8
  CHECK(refusal(R"({"method":"status"} trailing)") == code::parse_error);

  std::string big =
      R"({"method":"status","params":{"x":")" + std::string(kMaxRequestBytes, 'a') + "\"}}";
  CHECK(refusal(big) == code::too_large);

  CHECK(refusal("[]") == code::invalid_request);
  CHECK(refusal("42") == code::invalid_request);
  CHECK(refusal(R"("status")") == code::invalid_request);
  CHECK(refusal("{}") == code::invalid_request);
  CHECK(refusal(R"({"method":5})") == code::invalid_request);
  CHECK(refusal(R"({"method":"status","params":[1]})") == code::invalid_request);
  CHECK(refusal(R"({"method":"status","params":null})") == code::invalid_request);
  CHECK(refusal(R"({"method":"status","id":{}})") == code::invalid_request);
  CHECK(refusal(R"({"method":"status","id":true})") == code::invalid_request);
  CHECK(refusal(R"({"method":"status","jsonrpc":"2.0"})") == code::invalid_request);
  CHECK(refusal(R"({"method":"status","id":")" + std::string(kMaxIdBytes + 1, 'i') + "\"}") ==
        code::invalid_request);
  std::string deep = R"({"method":"status","params":{"a":)" + std::string(kMaxDepth, '[') +
                     std::string(kMaxDepth, ']') + "}}";
  CHECK(refusal(deep) == code::invalid_request);
  // Brackets inside strings are not nesting.
  std::string in_string =
      R"({"method":"status","params":{"a":")" + std::string(kMaxDepth * 2, '[') + "\"}}";
  CHECK(refusal(in_string) == "");

  CHECK(refusal(R"({"method":"shutdown"})") == code::unknown_method);
  CHECK(refusal(R"({"method":""})") == code::unknown_method);
}

TEST_CASE("an error past the id still knows the id") {
  json id;
  CHECK_THROWS_AS(parse_request(R"({"id":"q1","method":"nope"})", &id), ProtocolError);
  CHECK(id == "q1");
  json id2;
  CHECK_THROWS_AS(parse_request(R"({"id":3,"method":"status","extra":1})", &id2), ProtocolError);
  CHECK(id2 == 3);
}

TEST_CASE("unknown_method names the known ones") {
  try {
    access_needed("bogus");
    FAIL("no throw");
  } catch (const ProtocolError& e) {
    CHECK(e.code() == code::unknown_method);
    CHECK(std::string(e.what()).find("engine.start") != std::string::npos);
  }
}

TEST_CASE("methods: reads and writes") {
  for (auto m : {"status", "plan", "verify", "engine.status"})
    CHECK(access_needed(m) == Access::read);
  for (auto m : {"apply", "revert", "reload", "engine.start", "engine.stop"})
    CHECK(access_needed(m) == Access::write);
  CHECK(methods().size() == 9);
}

TEST_CASE("replies are one JSON line of the documented shape") {
  std::string ok = ok_reply(4, {{"a", 1}});
  REQUIRE(ok.back() == '\n');
  CHECK(ok.find('\n') == ok.size() - 1);
  auto j = json::parse(ok);
  CHECK(j == json{{"id", 4}, {"ok", true}, {"result", {{"a", 1}}}});

  std::string err = error_reply("x", code::forbidden, "line one\nline two");
  REQUIRE(err.back() == '\n');
  CHECK(err.find('\n') == err.size() - 1);
  j = json::parse(err);
  CHECK(j["id"] == "x");
  CHECK(j["ok"] == false);
  CHECK(j["error"]["code"] == "forbidden");
  CHECK(j["error"]["message"] == "line one\nline two");

  // Invalid UTF-8 (a name echoed from a client, a sysfs value) never throws.
  std::string bad = error_reply(nullptr, code::failed, "\xff\xfe value");
  CHECK(json::parse(bad)["id"].is_null());
  CHECK_NOTHROW(ok_reply(nullptr, {{"v", "\xc3"}}));
}
