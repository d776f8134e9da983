#include "stack/state_lock.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "stack/journal.hpp"
#include "stack/text_util.hpp"

namespace epyctune::stack {

LockHeldError::LockHeldError(const std::string& path, int pid)
    : std::runtime_error(fmt::format(
          "another epyctune (pid {}) holds {}: it is applying or reverting right now. Wait for "
          "it to finish; if it hangs, stop that process (kill {}) and run the command again",
          pid, path, pid)),
      pid_(pid) {}

namespace {

int read_pid(int fd) {
  char buf[32] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  try {
    return static_cast<int>(parse_u64(std::string(buf, static_cast<size_t>(n))));
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

StateLock::StateLock(const host::Sysroot& sys) : sys_(sys) {
  auto path = sys.resolve(kLockPath);
  for (int attempt = 0; attempt < 10; ++attempt) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw host::HostError("open lock", path.string(), errno);
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      int pid = read_pid(fd_);
      ::close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK) throw LockHeldError(path.string(), pid);
      throw host::HostError("flock", path.string(), err);
    }
    // A revert may have unlinked the file between our open and flock: then we
    // locked an orphan inode and must start again on the current file.
    struct stat held {
    }, now{};
    if (::fstat(fd_, &held) == 0 && ::stat(path.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev)
      break;
    ::close(fd_);
    fd_ = -1;
  }
  if (fd_ < 0) throw host::HostError("lock (file keeps changing)", path.string(), EAGAIN);
  int old = read_pid(fd_);
  if (old > 0 && old != ::getpid()) {
    bool alive = ::kill(old, 0) == 0 || errno == EPERM;
    recovered_ = fmt::format(
        "recovered a stale lock left by pid {} ({})", old,
        alive ? "that pid is running but no longer holds the lock" : "no longer running");
  }
  std::string me = fmt::format("{}\n", ::getpid());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) < 0)
    throw host::HostError("write lock", path.string(), errno);
}

StateLock::~StateLock() {
  if (fd_ >= 0) ::close(fd_);
}

void StateLock::remove_file() {
  if (sys_.exists(kLockPath)) sys_.remove_file(kLockPath);
}

}  // namespace epyctune::stack
