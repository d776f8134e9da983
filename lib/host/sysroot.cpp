#include "host/sysroot.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace epyctune::host {

namespace fs = std::filesystem;

namespace {

std::string describe(int err) {
  // EXDEV only comes from RESOLVE_BENEATH here (renames stay in one directory).
  if (err == EXDEV)
    return "leads outside the sysroot (a symlink or '..' points out of it); refused";
  if (err == ENOSYS)
    return "openat2(2) is not available (Linux 5.6 or later is needed to confine host access)";
  return std::strerror(err);
}

// The path below the root, without leading slashes; "." for the root itself.
std::string relative(std::string_view host_path) {
  while (!host_path.empty() && host_path.front() == '/') host_path.remove_prefix(1);
  while (!host_path.empty() && host_path.back() == '/') host_path.remove_suffix(1);
  return host_path.empty() ? std::string(".") : std::string(host_path);
}

std::atomic<bool> g_said_enosys{false};

int openat2_beneath(int dirfd, const std::string& rel, int flags, unsigned mode) {
  struct open_how how {};
  how.flags = static_cast<uint64_t>(flags) | O_CLOEXEC;
  // The kernel rejects a mode without O_CREAT/O_TMPFILE.
  how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  for (;;) {
    long fd = ::syscall(SYS_openat2, dirfd, rel.c_str(), &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    // EAGAIN: a concurrent rename raced the lookup; the kernel asks for a retry.
    if (errno == EAGAIN || errno == EINTR) continue;
    if (errno == ENOSYS && !g_said_enosys.exchange(true))
      std::fprintf(stderr,
                   "epyctune: this kernel has no openat2(2) (Linux 5.6+): host access cannot be "
                   "confined to the sysroot, so it is refused\n");
    return -1;
  }
}

void write_all(int fd, std::string_view data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw HostError("write", path, errno);
    }
    off += static_cast<size_t>(n);
  }
}

}  // namespace

HostError::HostError(std::string op, std::string path, int err)
    : std::runtime_error(fmt::format("{} {}: {}", op, path, describe(err))),
      op_(std::move(op)),
      path_(std::move(path)),
      err_(err) {}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    reset(o.fd_);
    o.fd_ = -1;
  }
  return *this;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Sysroot::Sysroot(fs::path root) : root_(std::move(root)) {
  if (root_.empty()) root_ = "/";
  std::error_code ec;
  auto canon = fs::weakly_canonical(root_, ec);
  if (!ec) root_ = canon;
  live_ = (root_ == fs::path("/"));
}

fs::path Sysroot::resolve(std::string_view host_path) const {
  std::string_view rel = host_path;
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  if (live_) return fs::path("/") / rel;
  return root_ / rel;
}

UniqueFd Sysroot::open_beneath(std::string_view host_path, int flags, unsigned mode) const {
  UniqueFd root(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return UniqueFd();
  return UniqueFd(openat2_beneath(root.get(), relative(host_path), flags, mode));
}

UniqueFd Sysroot::open_or_throw(std::string_view op, std::string_view host_path, int flags,
                                unsigned mode) const {
  auto fd = open_beneath(host_path, flags, mode);
  if (!fd) throw HostError(std::string(op), resolve(host_path).string(), errno);
  return fd;
}

std::pair<UniqueFd, std::string> Sysroot::open_parent(std::string_view op,
                                                      std::string_view host_path) const {
  std::string rel = relative(host_path);
  auto slash = rel.rfind('/');
  std::string leaf = slash == std::string::npos ? rel : rel.substr(slash + 1);
  std::string parent = slash == std::string::npos ? "/" : "/" + rel.substr(0, slash);
  if (leaf == "." || leaf == ".." || leaf.empty())
    throw HostError(std::string(op), resolve(host_path).string(), EINVAL);
  auto dir = open_beneath(parent, O_RDONLY | O_DIRECTORY);
  if (!dir) throw HostError(std::string(op), resolve(host_path).string(), errno);
  return {std::move(dir), leaf};
}

bool Sysroot::exists(std::string_view p) const {
  return static_cast<bool>(open_beneath(p, O_PATH));
}

bool Sysroot::exists_nofollow(std::string_view p) const {
  return static_cast<bool>(open_beneath(p, O_PATH | O_NOFOLLOW));
}

bool Sysroot::is_dir(std::string_view p) const {
  auto fd = open_beneath(p, O_PATH);
  struct stat st {};
  return fd && ::fstat(fd.get(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::optional<std::string> Sysroot::read(std::string_view p) const {
  auto path = resolve(p).string();
  // Non-blocking so that a FIFO planted where a file belongs cannot hang us.
  auto f = open_beneath(p, O_RDONLY | O_NONBLOCK);
  if (!f) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw HostError("read", path, errno);
  }
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) throw HostError("stat", path, errno);
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
    throw HostError("read (a FIFO or socket, not a file)", path, EINVAL);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(f.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw HostError("read", path, errno);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxReadBytes)
      throw HostError(fmt::format("read (larger than {} bytes)", kMaxReadBytes), path, EFBIG);
  }
  return out;
}

std::optional<std::string> Sysroot::read_value(std::string_view p) const {
  auto v = read(p);
  if (!v) return v;
  while (!v->empty() &&
         (v->back() == '\n' || v->back() == ' ' || v->back() == '\t' || v->back() == '\r'))
    v->pop_back();
  return v;
}

void Sysroot::write(std::string_view p, std::string_view data) const {
  auto path = resolve(p).string();
  auto f = open_or_throw("open for write", p, O_WRONLY | O_TRUNC | O_NONBLOCK);
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) throw HostError("stat", path, errno);
  if (!S_ISREG(st.st_mode)) throw HostError("write (not a regular file)", path, EINVAL);
  // sysfs wants the whole value in one write() call.
  ssize_t n = ::write(f.get(), data.data(), data.size());
  if (n < 0) throw HostError("write", path, errno);
  if (static_cast<size_t>(n) != data.size()) throw HostError("short write", path, EIO);
}

void Sysroot::write_file_atomic(std::string_view p, std::string_view data, unsigned mode) const {
  auto path = resolve(p).string();
  auto [dir, leaf] = open_parent("create", p);
  std::string tmp = fmt::format("{}.tmp.{}", leaf, ::getpid());
  std::string tmp_path = path + tmp.substr(leaf.size());
  // O_EXCL|O_NOFOLLOW: never write through a name someone planted.
  ::unlinkat(dir.get(), tmp.c_str(), 0);
  UniqueFd f(
      ::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!f) throw HostError("create", tmp_path, errno);
  try {
    write_all(f.get(), data, tmp_path);
    if (::fchmod(f.get(), mode) != 0) throw HostError("chmod", tmp_path, errno);
    if (::fsync(f.get()) != 0) throw HostError("fsync", tmp_path, errno);
    if (::renameat(dir.get(), tmp.c_str(), dir.get(), leaf.c_str()) != 0)
      throw HostError("rename", path, errno);
  } catch (...) {
    ::unlinkat(dir.get(), tmp.c_str(), 0);
    throw;
  }
  ::fsync(dir.get());
}

void Sysroot::remove_file(std::string_view p) const {
  auto [dir, leaf] = open_parent("remove", p);
  if (::unlinkat(dir.get(), leaf.c_str(), 0) != 0)
    throw HostError("remove", resolve(p).string(), errno);
  ::fsync(dir.get());
}

void Sysroot::make_dir(std::string_view p) const {
  auto [dir, leaf] = open_parent("mkdir", p);
  if (::mkdirat(dir.get(), leaf.c_str(), 0755) != 0)
    throw HostError("mkdir", resolve(p).string(), errno);
}

void Sysroot::remove_dir(std::string_view p) const {
  auto [dir, leaf] = open_parent("rmdir", p);
  if (::unlinkat(dir.get(), leaf.c_str(), AT_REMOVEDIR) != 0)
    throw HostError("rmdir", resolve(p).string(), errno);
}

void Sysroot::make_dirs(std::string_view p) const {
  std::string rel = relative(p);
  if (rel == ".") return;
  std::string prefix;
  size_t pos = 0;
  while (pos <= rel.size()) {
    size_t slash = rel.find('/', pos);
    if (slash == std::string::npos) slash = rel.size();
    prefix = "/" + rel.substr(0, slash);
    pos = slash + 1;
    if (is_dir(prefix)) continue;
    try {
      make_dir(prefix);
    } catch (const HostError& e) {
      if (e.err() != EEXIST || !is_dir(prefix)) throw HostError("mkdir -p", e.path(), e.err());
    }
  }
}

std::vector<std::string> Sysroot::list(std::string_view p) const {
  std::vector<std::string> names;
  auto fd = open_beneath(p, O_RDONLY | O_DIRECTORY);
  if (!fd) {
    if (errno == ENOENT || errno == ENOTDIR) return names;
    throw HostError("list", resolve(p).string(), errno);
  }
  DIR* d = ::fdopendir(fd.get());
  if (!d) throw HostError("list", resolve(p).string(), errno);
  (void)fd.release();  // closedir() closes it
  while (const dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

long Sysroot::fs_type(std::string_view p) const {
  std::string path(p);
  for (;;) {
    auto fd = open_beneath(path, O_PATH);
    struct statfs st {};
    if (fd && ::fstatfs(fd.get(), &st) == 0) return static_cast<long>(st.f_type);
    auto slash = path.rfind('/');
    if (slash == std::string::npos || path == "/") return 0;
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

std::string Sysroot::msr_path(int cpu) const {
  return fmt::format("/dev/cpu/{}/msr", cpu);
}

uint64_t Sysroot::read_msr(int cpu, uint32_t address) const {
  auto f = open_or_throw("open msr", msr_path(cpu), O_RDONLY);
  uint64_t v = 0;
  ssize_t n = ::pread(f.get(), &v, sizeof v, static_cast<off_t>(address));
  auto path = resolve(msr_path(cpu)).string();
  if (n < 0) throw HostError(fmt::format("rdmsr {:#x}", address), path, errno);
  if (n != sizeof v) throw HostError(fmt::format("rdmsr {:#x}", address), path, EIO);
  return v;
}

void Sysroot::write_msr(int cpu, uint32_t address, uint64_t value) const {
  auto f = open_or_throw("open msr", msr_path(cpu), O_WRONLY);
  ssize_t n = ::pwrite(f.get(), &value, sizeof value, static_cast<off_t>(address));
  auto path = resolve(msr_path(cpu)).string();
  if (n < 0) throw HostError(fmt::format("wrmsr {:#x}", address), path, errno);
  if (n != sizeof value) throw HostError(fmt::format("wrmsr {:#x}", address), path, EIO);
}

}  // namespace epyctune::host
