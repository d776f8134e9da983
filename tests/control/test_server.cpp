#include <sys/stat.h>

#include <filesystem>

#include "control_test_util.hpp"

using namespace epyctune::control;
using namespace epyctune::testing;
using nlohmann::json;

namespace {

std::string code_of(Client& c, const std::string& method, const json& params = json::object()) {
  try {
    c.call(method, params, 3000);
    return "";
  } catch (const ProtocolError& e) {
    return e.code();
  }
}

}  // namespace

TEST_CASE("server: a status call works, and the socket is there for everyone") {
  TestServer s;
  struct stat st {};
  REQUIRE(::stat(s.path.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 0777) == 0666);
  auto c = s.client();
  CHECK(c.call("status") == json{{"daemon", "test"}});
  // One connection, several calls.
  CHECK(c.call("apply", {{"profile", "p"}})["params"]["profile"] == "p");
  CHECK(c.call("status") == json{{"daemon", "test"}});
}

TEST_CASE("server: refusals and failures come back as error codes") {
  TestServer s;
  auto c = s.client();
  CHECK(code_of(c, "shutdown") == code::unknown_method);
  CHECK(code_of(c, "revert") == code::failed);
  CHECK(code_of(c, "reload") == code::busy);
  CHECK(code_of(c, "status") == "");  // the connection survived them
  try {
    c.call("revert");
  } catch (const ProtocolError& e) {
    CHECK(std::string(e.what()) == "the journal is damaged");
  }
  CHECK(s.calls.load() == 4);  // unknown methods never reach the handler
}

TEST_CASE("server: replies echo the id, errors too") {
  TestServer s;
  int fd = raw_connect(s.path);
  REQUIRE(fd >= 0);
  raw_send(fd, "{\"id\":\"a\",\"method\":\"status\"}\n{\"id\":9,\"method\":\"nope\"}\n");
  auto r1 = json::parse(raw_read_line(fd, 2000));
  auto r2 = json::parse(raw_read_line(fd, 2000));
  CHECK(r1["id"] == "a");
  CHECK(r1["ok"] == true);
  CHECK(r2["id"] == 9);
  CHECK(r2["error"]["code"] == "unknown_method");
  ::close(fd);
}

TEST_CASE("server: garbage and NUL bytes get parse_error, the connection goes on") {
  TestServer s;
  int fd = raw_connect(s.path);
  REQUIRE(fd >= 0);
  raw_send(fd, std::string("\x00\x01garbage\xff\n", 12));
  CHECK(json::parse(raw_read_line(fd, 2000))["error"]["code"] == "parse_error");
  raw_send(fd, std::string("{\"method\":\"sta\0tus\"}\r\n", 22));
  CHECK(json::parse(raw_read_line(fd, 2000))["error"]["code"] == "parse_error");
  raw_send(fd, "[1,2]\n\n   \n");  // blank lines are skipped, not answered
  CHECK(json::parse(raw_read_line(fd, 2000))["error"]["code"] == "invalid_request");
  raw_send(fd, "{\"method\":\"status\"}\r\n");
  auto ok = json::parse(raw_read_line(fd, 2000));
  CHECK(ok["ok"] == true);
  ::close(fd);
}

TEST_CASE("server: a request without its final newline is answered at end of input") {
  TestServer s;
  int fd = raw_connect(s.path);
  REQUIRE(fd >= 0);
  raw_send(fd, "{\"method\":\"status\"}");
  ::shutdown(fd, SHUT_WR);  // what `socat` and `nc -N` do at the end of stdin
  bool eof = false;
  auto r = json::parse(raw_read_line(fd, 2000, &eof));
  CHECK(r["result"]["daemon"] == "test");
  CHECK(raw_closed_within(fd, 2000));
  ::close(fd);
}

TEST_CASE("server: a client that leaves mid-request is cleaned up") {
  TestServer s;
  int fd = raw_connect(s.path);
  REQUIRE(fd >= 0);
  raw_send(fd, "{\"method\":\"verify\",\"params\":{\"ms\":200}}\n");
  ::close(fd);  // its reply has nobody to go to
  int half = raw_connect(s.path);
  REQUIRE(half >= 0);
  raw_send(half, "{\"method\":\"sta");
  ::close(half);
  auto c = s.client();
  CHECK(c.call("status")["daemon"] == "test");  // after the verify: one handler thread
  CHECK(s.calls.load() == 2);
}

TEST_CASE("server: stale socket replaced, live one refused, other files left alone") {
  TempDir dir;
  std::string path = (dir.path() / "epyctuned.sock").string();
  {
    // A socket file nobody listens on: what a killed daemon leaves.
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    ::close(fd);
  }
  REQUIRE(std::filesystem::exists(path));
  ServerOptions o;
  o.path = path;
  auto handler = [](const Request&, const Peer&) { return json::object(); };
  {
    Server live(o, handler);
    live.start();
    try {
      Server second(o, handler);
      FAIL("a second server bound a live socket");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()).find(path) != std::string::npos);
    }
    auto c = Client::connect(path, 1000);
    REQUIRE(c.has_value());
    CHECK(c->call("status") == json::object());  // the first one still serves
  }
  CHECK_FALSE(std::filesystem::exists(path));  // removed on destruction
  write_file(path, "not a socket");
  CHECK_THROWS_AS(Server(o, handler), std::runtime_error);
  CHECK(read_file(path) == "not a socket");
}

TEST_CASE("client: no daemon is nullopt, not an error") {
  TempDir dir;
  CHECK_FALSE(Client::connect((dir.path() / "none.sock").string()).has_value());
  CHECK_FALSE(Client::connect((dir.path() / "no/such/dir.sock").string()).has_value());
  CHECK_THROWS_AS(Client::connect(std::string(200, 'x')), std::runtime_error);
}
