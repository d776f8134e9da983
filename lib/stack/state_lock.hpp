// One writer at a time: apply and revert hold an flock on
// /var/lib/epyctune/lock (under the sysroot), and the file at that name always
// carries its holder's pid: a taker writes its pid into a private file, locks
// it, and only then links it into place (link(2) fails if the name exists). A
// clean release unlinks the file while still holding it. So:
//   - a lock file whose flock is held names its holder; a contender says so;
//   - a lock file whose flock is free was left by a process that died holding
//     it: the next taker removes it and says whose it was (a stale lock).
// A holder that cannot be named (the recorded pid is gone, yet the flock is
// held) is reported as unknown, never with advice to kill a pid.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "host/sysroot.hpp"

namespace epyctune::stack {

class LockHeldError : public std::runtime_error {
 public:
  // pid <= 0: the holder is not known.
  LockHeldError(const std::string& path, int pid, const std::string& detail = "");
  int pid() const { return pid_; }

 private:
  int pid_;
};

class StateLock {
 public:
  // The state directory must exist. Throws LockHeldError when another process
  // holds the lock, host::HostError on I/O.
  explicit StateLock(const host::Sysroot& sys);
  ~StateLock();
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

  // Non-empty when a stale lock was recovered: who left it.
  const std::string& recovered() const { return recovered_; }
  // Unlinks the lock file while still holding it, then lets go. The
  // destructor does this too; revert calls it before removing the state dir.
  void release();

 private:
  const host::Sysroot& sys_;
  host::UniqueFd fd_;
  std::string recovered_;
};

// The one way apply and revert take the lock. On a held lock sets exit_code
// (kExitLocked) and error and returns null; a recovered stale lock adds a note.
std::unique_ptr<StateLock> take_state_lock(const host::Sysroot& sys, int& exit_code,
                                           std::string& error, std::vector<std::string>& notes);

}  // namespace epyctune::stack
