// Internal to lib/control: the Unix socket address of a path and an owned fd.
#pragma once

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace epyctune::control {

inline sockaddr_un unix_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    throw std::runtime_error(
        fmt::format("socket path '{}' is {} bytes; a Unix socket path is 1 to {} bytes", path,
                    path.size(), sizeof addr.sun_path - 1));
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

struct UniqueSocket {
  int fd = -1;
  explicit UniqueSocket(int f) : fd(f) {}
  UniqueSocket(const UniqueSocket&) = delete;
  UniqueSocket& operator=(const UniqueSocket&) = delete;
  ~UniqueSocket() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

}  // namespace epyctune::control
