// Plain TCP for the tests that play a hostile or old client: bytes in and
// out exactly as written, no HTTP library smoothing them.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

namespace epyctune::testing {

inline int tcp_connect(const std::string& host, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// False once the peer has closed or reset.
inline bool send_all(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Everything the peer sends until it closes, or until timeout_ms pass with
// nothing new. closed: whether it closed.
inline std::string read_all(int fd, int timeout_ms, bool* closed = nullptr) {
  std::string out;
  char buf[65536];
  if (closed) *closed = false;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return out;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      if (closed) *closed = true;
      return out;
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

// Reads until `out` holds `marker` (true) or timeout_ms pass with nothing new.
inline bool read_until(int fd, std::string& out, std::string_view marker, int timeout_ms) {
  char buf[65536];
  while (out.find(marker) == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return false;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return out.find(marker) != std::string::npos;
    out.append(buf, static_cast<size_t>(n));
  }
  return true;
}

// The status code of the first reply in `bytes`, 0 when there is none.
inline int status_of(const std::string& bytes) {
  if (bytes.rfind("HTTP/1.", 0) != 0 || bytes.size() < 12) return 0;
  return std::atoi(bytes.c_str() + 9);
}

// A process's resident memory in KiB (VmRSS), -1 when unreadable.
inline long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

inline long ms_since(std::chrono::steady_clock::time_point t) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
          .count());
}

}  // namespace epyctune::testing
