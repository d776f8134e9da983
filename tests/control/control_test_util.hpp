// Raw socket helpers and a test Server in a temporary directory, for the
// control suites.
#pragma once

#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "control/client.hpp"
#include "control/server.hpp"
#include "test_util.hpp"

namespace epyctune::testing {

// A connected Unix socket to `path`, or -1.
inline int raw_connect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends what it can; a server that closed early makes the rest fail quietly.
inline void raw_send(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

// One line (without '\n'), or what came before EOF / the timeout. `eof` tells
// whether the peer closed.
inline std::string raw_read_line(int fd, int timeout_ms, bool* eof = nullptr) {
  std::string s;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (eof) *eof = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    end - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return s;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return s;
    char c;
    ssize_t n = ::recv(fd, &c, 1, 0);
    if (n <= 0) {
      if (eof) *eof = true;
      return s;
    }
    if (c == '\n') return s;
    s += c;
  }
}

// True when the peer closes within `timeout_ms` (what it sent first is skipped).
inline bool raw_closed_within(int fd, int timeout_ms) {
  bool eof = false;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!eof && std::chrono::steady_clock::now() < end) raw_read_line(fd, timeout_ms, &eof);
  return eof;
}

inline long ms_since(std::chrono::steady_clock::time_point t) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
          .count());
}

// A Server in its own temporary directory. Its handler answers status with
// {"daemon":"test"}, echoes apply's params, sleeps `verify` for params.ms
// (and, with params.gate, until `gate` opens), fails revert, and refuses
// reload as busy.
struct TestServer {
  TempDir dir;
  std::string path = (dir.path() / "run/epyctune/epyctuned.sock").string();
  std::atomic<int> calls{0};
  std::atomic<bool> gate{false};
  std::unique_ptr<control::Server> server;

  explicit TestServer(control::ServerOptions o = {}) {
    o.path = path;
    server = std::make_unique<control::Server>(
        o, [this](const control::Request& r, const control::Peer& p) {
          ++calls;
          if (r.method == "verify") {
            std::this_thread::sleep_for(std::chrono::milliseconds(r.params.value("ms", 0)));
            while (r.params.value("gate", false) && !gate.load())
              std::this_thread::sleep_for(std::chrono::milliseconds(5));
            return nlohmann::json{{"slept", true}};
          }
          if (r.method == "apply") return nlohmann::json{{"params", r.params}, {"uid", p.uid}};
          if (r.method == "revert") throw std::runtime_error("the journal is damaged");
          if (r.method == "reload") throw control::ProtocolError(control::code::busy, "later");
          return nlohmann::json{{"daemon", "test"}};
        });
    server->start();
  }

  control::Client client() {
    auto c = control::Client::connect(path, 2000);
    REQUIRE(c.has_value());
    return std::move(*c);
  }
};

}  // namespace epyctune::testing
