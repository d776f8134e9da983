// Kernel uevents (NETLINK_KOBJECT_UEVENT): a CPU or memory block coming or
// going changes what the stack's knobs read (a new CPU's cpufreq governor,
// its IRQ affinity, its MSRs), so the daemon re-verifies after one, debounced
// because a hotplug arrives as a burst of events.
#pragma once

#include <string>
#include <string_view>

namespace epyctune::daemon {

struct Uevent {
  std::string action, devpath, subsystem;
};

// Parses one kernel uevent datagram ("ACTION@DEVPATH\0KEY=VALUE\0...").
// False for anything else (udev's re-broadcasts carry a "libudev" header).
bool parse_uevent(std::string_view datagram, Uevent& out);

// The events that can change a knob: subsystem cpu or memory.
bool uevent_matters(const Uevent& e);

// A non-blocking socket on the kernel's uevent group; fd() < 0 when it could
// not be opened (a container without the host's network namespace), with
// error() saying why.
class UeventSocket {
 public:
  UeventSocket();
  ~UeventSocket();
  UeventSocket(const UeventSocket&) = delete;
  UeventSocket& operator=(const UeventSocket&) = delete;
  int fd() const { return fd_; }
  const std::string& error() const { return error_; }
  // Drains pending datagrams; true when one of them mattered.
  bool drain(std::string* what = nullptr);

 private:
  int fd_ = -1;
  std::string error_;
};

}  // namespace epyctune::daemon
