#include "daemon/uevents.hpp"

#include <linux/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace epyctune::daemon {

bool parse_uevent(std::string_view d, Uevent& out) {
  out = {};
  auto first_end = d.find('\0');
  std::string_view head = d.substr(0, first_end);
  auto at = head.find('@');
  if (at == std::string_view::npos || at == 0) return false;
  out.action = std::string(head.substr(0, at));
  out.devpath = std::string(head.substr(at + 1));
  if (first_end == std::string_view::npos) return true;
  std::string_view rest = d.substr(first_end + 1);
  while (!rest.empty()) {
    auto end = rest.find('\0');
    std::string_view kv = rest.substr(0, end);
    if (kv.rfind("SUBSYSTEM=", 0) == 0) out.subsystem = std::string(kv.substr(10));
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return true;
}

bool uevent_matters(const Uevent& e) {
  return e.subsystem == "cpu" || e.subsystem == "memory";
}

UeventSocket::UeventSocket() {
  fd_ = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT);
  if (fd_ < 0) {
    error_ = std::string("socket(NETLINK_KOBJECT_UEVENT): ") + std::strerror(errno);
    return;
  }
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = 1;  // the kernel's own events, not udev's re-broadcasts
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    error_ = std::string("bind to the kernel uevent group: ") + std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
  }
}

UeventSocket::~UeventSocket() {
  if (fd_ >= 0) ::close(fd_);
}

bool UeventSocket::drain(std::string* what) {
  bool matters = false;
  char buf[8192];
  while (fd_ >= 0) {
    sockaddr_nl from{};
    socklen_t len = sizeof from;
    ssize_t n = ::recvfrom(fd_, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n <= 0) break;
    if (from.nl_pid != 0) continue;  // only the kernel's, never another process's datagrams
    Uevent e;
    if (parse_uevent(std::string_view(buf, static_cast<size_t>(n)), e) && uevent_matters(e)) {
      matters = true;
      if (what) *what = e.action + " " + e.devpath;
    }
  }
  return matters;
}

}  // namespace epyctune::daemon
