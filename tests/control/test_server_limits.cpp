// The bounds: what a hostile or broken client can do to the server, and that
// it never holds up anyone else.
#include <vector>

#include "control_test_util.hpp"

using namespace epyctune::control;
using namespace epyctune::testing;
using nlohmann::json;

TEST_CASE("server: an oversized line gets too_large and the next client is served") {
  TestServer s;
  int fd = raw_connect(s.path);
  REQUIRE(fd >= 0);
  std::thread writer([fd] { raw_send(fd, std::string(kMaxRequestBytes + 4096, 'a')); });
  auto r = json::parse(raw_read_line(fd, 2000));
  writer.join();
  CHECK(r["error"]["code"] == "too_large");
  CHECK(raw_closed_within(fd, 2000));
  ::close(fd);

  // A line just over the bound, newline included, in one write.
  fd = raw_connect(s.path);
  REQUIRE(fd >= 0);
  std::string line =
      R"({"method":"status","params":{"x":")" + std::string(kMaxRequestBytes, 'b') + "\"}}\n";
  std::thread writer2([fd, &line] { raw_send(fd, line); });
  r = json::parse(raw_read_line(fd, 2000));
  writer2.join();
  CHECK(r["error"]["code"] == "too_large");
  ::close(fd);

  auto c = s.client();
  CHECK(c.call("status")["daemon"] == "test");
}

TEST_CASE("server: a slow client gets timeout and never holds up another") {
  ServerOptions o;
  o.request_timeout_ms = 400;
  TestServer s(o);
  auto start = std::chrono::steady_clock::now();
  int slow = raw_connect(s.path);
  REQUIRE(slow >= 0);
  raw_send(slow, "{\"method\":\"sta");
  // Meanwhile another client is answered at once.
  auto c = s.client();
  CHECK(c.call("status")["daemon"] == "test");
  CHECK(ms_since(start) < 300);

  auto r = json::parse(raw_read_line(slow, 3000));
  long waited = ms_since(start);
  CHECK(r["error"]["code"] == "timeout");
  CHECK(waited >= 380);
  CHECK(waited < 2000);
  CHECK(raw_closed_within(slow, 1000));
  ::close(slow);
}

TEST_CASE("server: an idle connection is closed") {
  ServerOptions o;
  o.idle_timeout_ms = 300;
  TestServer s(o);
  int fd = raw_connect(s.path);
  REQUIRE(fd >= 0);
  auto start = std::chrono::steady_clock::now();
  CHECK(raw_closed_within(fd, 2000));
  CHECK(ms_since(start) >= 280);
  ::close(fd);
}

TEST_CASE("server: bytes that complete no request do not keep a connection open") {
  ServerOptions o;
  o.idle_timeout_ms = 300;
  TestServer s(o);
  int fd = raw_connect(s.path);
  REQUIRE(fd >= 0);
  auto start = std::chrono::steady_clock::now();
  // A blank line every 50 ms: each used to renew the idle clock, so a handful
  // of such clients held every slot for ever.
  bool closed = false;
  while (!closed && ms_since(start) < 3000) {
    raw_send(fd, "\n");
    closed = raw_closed_within(fd, 50);
  }
  CHECK(closed);
  CHECK(ms_since(start) >= 280);
  CHECK(ms_since(start) < 1500);
  ::close(fd);
}

TEST_CASE("server: beyond max_clients a client gets busy; a freed slot is reused") {
  ServerOptions o;
  o.max_clients = 2;
  TestServer s(o);
  auto a = s.client();
  auto b = s.client();
  CHECK(a.call("status")["daemon"] == "test");  // both accepted by now
  CHECK(b.call("status")["daemon"] == "test");
  {
    auto third = s.client();
    try {
      third.call("status", json::object(), 2000);
      FAIL("a third client was served");
    } catch (const ProtocolError& e) {
      CHECK(e.code() == code::busy);
    }
  }
  { auto gone = std::move(a); }  // closes: its slot frees once the server sees it
  bool served = false;
  for (int i = 0; i < 20 && !served; ++i) {
    auto again = s.client();
    try {
      served = again.call("status", json::object(), 2000)["daemon"] == "test";
    } catch (const ProtocolError& e) {
      CHECK(e.code() == code::busy);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  CHECK(served);
}

TEST_CASE("server: a long request delays only those queued behind it") {
  TestServer s;
  std::thread slow([&s] {
    auto c = s.client();
    CHECK(c.call("verify", {{"ms", 300}})["slept"] == true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Connecting and a refused method do not wait for the handler.
  auto start = std::chrono::steady_clock::now();
  auto c = s.client();
  try {
    c.call("nope");
  } catch (const ProtocolError& e) {
    CHECK(e.code() == code::unknown_method);
  }
  CHECK(ms_since(start) < 200);
  CHECK(c.call("status")["daemon"] == "test");  // queued behind verify
  slow.join();
}

TEST_CASE("server: the handler queue is bounded") {
  ServerOptions o;
  o.max_clients = 64;
  TestServer s(o);
  // One request held in the handler, then more than the queue holds.
  int held = raw_connect(s.path);
  REQUIRE(held >= 0);
  raw_send(held, "{\"method\":\"verify\",\"params\":{\"gate\":true}}\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::vector<int> fds;
  for (int i = 0; i < 40; ++i) {
    int fd = raw_connect(s.path);
    REQUIRE(fd >= 0);
    raw_send(fd, "{\"method\":\"status\"}\n");
    fds.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  s.gate = true;
  int ok = 0, busy = 0;
  for (int fd : fds) {
    auto r = json::parse(raw_read_line(fd, 3000));
    if (r["ok"] == true) ++ok;
    if (r["ok"] == false && r["error"]["code"] == "busy") ++busy;
    ::close(fd);
  }
  CHECK(json::parse(raw_read_line(held, 3000))["ok"] == true);
  ::close(held);
  CHECK(ok == 32);
  CHECK(busy == 8);
}
