#include "stack/state_lock.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "stack/apply.hpp"
#include "stack/journal.hpp"
#include "stack/text_util.hpp"

namespace epyctune::stack {

LockHeldError::LockHeldError(const std::string& path, int pid, const std::string& detail)
    : std::runtime_error(
          pid > 0 ? fmt::format("another epyctune (pid {}) holds {}: it is applying or reverting "
                                "right now. Wait for it to finish; if it hangs, stop that process "
                                "(kill {}) and run the command again",
                                pid, path, pid)
                  : fmt::format("another process holds {}, and which one cannot be told ({}). Wait "
                                "a moment and run the command again; if it stays locked, find the "
                                "holder with `fuser -v {}` rather than guessing a pid",
                                path, detail.empty() ? "no pid recorded" : detail, path)),
      pid_(pid > 0 ? pid : 0) {}

namespace {

constexpr const char* kLockName = "lock";

int read_pid(int fd) {
  char buf[32] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  try {
    auto v = parse_u64(trim(std::string(buf, static_cast<size_t>(n))));
    return v > 0 && v < (1u << 22) ? static_cast<int>(v) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

bool alive(int pid) {
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

// True when `name` in `dir` is the inode open as `fd`.
bool still_named(int dir, const char* name, int fd) {
  struct stat held {
  }, now{};
  return ::fstat(fd, &held) == 0 && ::fstatat(dir, name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
         held.st_ino == now.st_ino && held.st_dev == now.st_dev;
}

// A taker killed between creating its private "lock.PID.N" and linking it
// leaves that file behind; it would keep the state directory from being
// removed by a full revert. A live taker's file names a live pid.
void remove_dead_takers(const host::Sysroot& sys, int dir) {
  std::string prefix = std::string(kLockName) + ".";
  for (const auto& name : sys.list(kStateDir)) {
    if (!name.starts_with(prefix)) continue;
    try {
      auto rest = std::string_view(name).substr(prefix.size());
      int pid = static_cast<int>(parse_u64(rest.substr(0, rest.find('.'))));
      if (pid != ::getpid() && !alive(pid)) ::unlinkat(dir, name.c_str(), 0);
    } catch (const std::exception&) {
      // Not a taker's file.
    }
  }
}

}  // namespace

StateLock::StateLock(const host::Sysroot& sys) : sys_(sys) {
  std::string path = sys.resolve(kLockPath).string();
  auto dir = sys.open_or_throw("open state dir", kStateDir, O_RDONLY | O_DIRECTORY);
  // Our pid goes into a private file, locked, before the name appears.
  // "lock.PID.N": unique per taker, also between threads of one process.
  static std::atomic<unsigned> takers{0};
  std::string tmp = fmt::format("{}.{}.{}", kLockName, ::getpid(), takers++);
  ::unlinkat(dir.get(), tmp.c_str(), 0);
  host::UniqueFd mine(
      ::openat(dir.get(), tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!mine)
    throw host::HostError("create lock", sys.resolve(std::string(kStateDir) + "/" + tmp).string(),
                          errno);
  struct Cleanup {
    int dir;
    const std::string& name;
    ~Cleanup() { ::unlinkat(dir, name.c_str(), 0); }
  } cleanup{dir.get(), tmp};
  std::string me = fmt::format("{}\n", ::getpid());
  if (::write(mine.get(), me.data(), me.size()) != static_cast<ssize_t>(me.size()) ||
      ::flock(mine.get(), LOCK_EX | LOCK_NB) != 0)
    throw host::HostError("write lock", path, errno ? errno : EIO);

  int unknown_holder = 0;
  for (int attempt = 0; attempt < 200; ++attempt) {
    if (::linkat(dir.get(), tmp.c_str(), dir.get(), kLockName, 0) == 0) {
      fd_ = std::move(mine);
      remove_dead_takers(sys, dir.get());
      return;
    }
    if (errno != EEXIST) throw host::HostError("link lock", path, errno);
    host::UniqueFd other(
        ::openat(dir.get(), kLockName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!other) {
      if (errno == ENOENT) continue;  // released between our link and open
      throw host::HostError("open lock", path, errno);
    }
    struct stat st {};
    if (::fstat(other.get(), &st) != 0) throw host::HostError("stat lock", path, errno);
    if (!S_ISREG(st.st_mode)) throw host::HostError("lock (not a regular file)", path, EINVAL);
    int pid = read_pid(other.get());
    if (::flock(other.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) throw host::HostError("flock", path, errno);
      if (!still_named(dir.get(), kLockName, other.get())) continue;
      if (alive(pid)) throw LockHeldError(path, pid);
      // The recorded pid is gone yet the flock is held: another taker is
      // removing that stale file right now. Give it a moment.
      unknown_holder = pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    // Free flock on a named file: its holder died without releasing.
    if (!still_named(dir.get(), kLockName, other.get())) continue;
    if (::unlinkat(dir.get(), kLockName, 0) != 0 && errno != ENOENT)
      throw host::HostError("remove stale lock", path, errno);
    if (pid > 0 && pid != ::getpid())
      recovered_ = fmt::format(
          "recovered a stale lock left by pid {} ({})", pid,
          alive(pid) ? "that pid is running but no longer holds the lock" : "no longer running");
  }
  throw LockHeldError(
      path, 0,
      unknown_holder > 0
          ? fmt::format("the pid it records, {}, is no longer running", unknown_holder)
          : "the lock file kept changing");
}

void StateLock::release() {
  if (!fd_) return;
  auto dir = sys_.open_beneath(kStateDir, O_RDONLY | O_DIRECTORY);
  if (dir && still_named(dir.get(), kLockName, fd_.get())) ::unlinkat(dir.get(), kLockName, 0);
  fd_.reset();
}

StateLock::~StateLock() {
  release();
}

std::unique_ptr<StateLock> take_state_lock(const host::Sysroot& sys, int& exit_code,
                                           std::string& error, std::vector<std::string>& notes) {
  std::unique_ptr<StateLock> lock;
  try {
    lock = std::make_unique<StateLock>(sys);
  } catch (const LockHeldError& e) {
    exit_code = kExitLocked;
    error = e.what();
    return nullptr;
  }
  if (!lock->recovered().empty()) notes.push_back(lock->recovered());
  return lock;
}

}  // namespace epyctune::stack
