// One writer at a time: apply and revert hold an flock on
// /var/lib/epyctune/lock (under the sysroot) with the holder's pid inside.
// The kernel drops an flock when its holder dies, so a lock file left by a
// dead process is simply taken over (and said so); a live holder is reported
// with its pid.
#pragma once

#include <stdexcept>
#include <string>

#include "host/sysroot.hpp"

namespace epyctune::stack {

class LockHeldError : public std::runtime_error {
 public:
  LockHeldError(const std::string& path, int pid);
  int pid() const { return pid_; }

 private:
  int pid_;
};

class StateLock {
 public:
  // Throws LockHeldError when another live process holds it, host::HostError on I/O.
  explicit StateLock(const host::Sysroot& sys);
  ~StateLock();
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

  // Non-empty when a stale lock was recovered: who left it.
  const std::string& recovered() const { return recovered_; }
  // Unlinks the lock file while still holding it (end of a complete revert).
  void remove_file();

 private:
  const host::Sysroot& sys_;
  int fd_ = -1;
  std::string recovered_;
};

}  // namespace epyctune::stack
