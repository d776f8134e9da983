#include "host/sysroot.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace epyctune::host {

namespace fs = std::filesystem;

HostError::HostError(std::string op, std::string path, int err)
    : std::runtime_error(fmt::format("{} {}: {}", op, path, std::strerror(err))),
      op_(std::move(op)),
      path_(std::move(path)),
      err_(err) {}

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void fsync_dir(const fs::path& dir) {
  Fd d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd >= 0) ::fsync(d.fd);
}

}  // namespace

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

bool Sysroot::exists(std::string_view p) const {
  struct stat st {};
  return ::stat(resolve(p).c_str(), &st) == 0;
}

bool Sysroot::is_dir(std::string_view p) const {
  struct stat st {};
  return ::stat(resolve(p).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::optional<std::string> Sysroot::read(std::string_view p) const {
  auto path = resolve(p);
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw HostError("read", path.string(), errno);
  }
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw HostError("read", path.string(), errno);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
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
  auto path = resolve(p);
  Fd f{::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC)};
  if (f.fd < 0) throw HostError("open for write", path.string(), errno);
  // sysfs wants the whole value in one write() call.
  ssize_t n = ::write(f.fd, data.data(), data.size());
  if (n < 0) throw HostError("write", path.string(), errno);
  if (static_cast<size_t>(n) != data.size()) throw HostError("short write", path.string(), EIO);
}

void Sysroot::write_file_atomic(std::string_view p, std::string_view data, unsigned mode) const {
  auto path = resolve(p);
  auto tmp = path;
  tmp += fmt::format(".tmp.{}", ::getpid());
  {
    Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)};
    if (f.fd < 0) throw HostError("create", tmp.string(), errno);
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::write(f.fd, data.data() + off, data.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        int e = errno;
        ::unlink(tmp.c_str());
        throw HostError("write", tmp.string(), e);
      }
      off += static_cast<size_t>(n);
    }
    if (::fsync(f.fd) != 0) {
      int e = errno;
      ::unlink(tmp.c_str());
      throw HostError("fsync", tmp.string(), e);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw HostError("rename", path.string(), e);
  }
  fsync_dir(path.parent_path());
}

void Sysroot::remove_file(std::string_view p) const {
  auto path = resolve(p);
  if (::unlink(path.c_str()) != 0) throw HostError("remove", path.string(), errno);
  fsync_dir(path.parent_path());
}

void Sysroot::make_dir(std::string_view p) const {
  auto path = resolve(p);
  if (::mkdir(path.c_str(), 0755) != 0) throw HostError("mkdir", path.string(), errno);
}

void Sysroot::remove_dir(std::string_view p) const {
  auto path = resolve(p);
  if (::rmdir(path.c_str()) != 0) throw HostError("rmdir", path.string(), errno);
}

void Sysroot::make_dirs(std::string_view p) const {
  auto path = resolve(p);
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) throw HostError("mkdir -p", path.string(), ec.value());
}

std::vector<std::string> Sysroot::list(std::string_view dir) const {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(resolve(dir), ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string Sysroot::msr_path(int cpu) const {
  return fmt::format("/dev/cpu/{}/msr", cpu);
}

uint64_t Sysroot::read_msr(int cpu, uint32_t address) const {
  auto path = resolve(msr_path(cpu));
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw HostError("open msr", path.string(), errno);
  uint64_t v = 0;
  ssize_t n = ::pread(f.fd, &v, sizeof v, static_cast<off_t>(address));
  if (n < 0) throw HostError(fmt::format("rdmsr {:#x}", address), path.string(), errno);
  if (n != sizeof v) throw HostError(fmt::format("rdmsr {:#x}", address), path.string(), EIO);
  return v;
}

void Sysroot::write_msr(int cpu, uint32_t address, uint64_t value) const {
  auto path = resolve(msr_path(cpu));
  Fd f{::open(path.c_str(), O_WRONLY | O_CLOEXEC)};
  if (f.fd < 0) throw HostError("open msr", path.string(), errno);
  ssize_t n = ::pwrite(f.fd, &value, sizeof value, static_cast<off_t>(address));
  if (n < 0) throw HostError(fmt::format("wrmsr {:#x}", address), path.string(), errno);
  if (n != sizeof value) throw HostError(fmt::format("wrmsr {:#x}", address), path.string(), EIO);
}

}  // namespace epyctune::host
