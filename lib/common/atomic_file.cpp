#include "common/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

namespace epyctune {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, std::string_view what, int err) {
  throw std::runtime_error(
      fmt::format("{}: cannot write atomically ({}): {}", path.string(), what, std::strerror(err)));
}

// Closes the descriptor and, unless released, unlinks the temporary: every
// early exit (a throw included) leaves nothing behind.
class TempFile {
 public:
  TempFile(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }
  int close() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }
  void release() { path_.clear(); }

 private:
  int fd_;
  std::filesystem::path path_;
};

TempFile create_temp(const std::filesystem::path& path) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  std::random_device rd;
  for (int attempt = 0; attempt < 16; ++attempt) {
    // A leading dot keeps the temporary out of globs such as node_exporter's
    // *.prom, so a collector never reads it.
    auto tmp = dir / fmt::format(".{}.tmp.{}.{:08x}", path.filename().string(), ::getpid(), rd());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) return TempFile(fd, std::move(tmp));
    if (errno != EEXIST) fail(path, fmt::format("create {}", tmp.string()), errno);
  }
  fail(path, "create a unique temporary", EEXIST);
}

void write_all(int fd, std::string_view content, const std::filesystem::path& path) {
  while (!content.empty()) {
    ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, "write", errno);
    }
    content.remove_prefix(static_cast<size_t>(n));
  }
}

void fsync_dir(const std::filesystem::path& path) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(path, "open directory for fsync", errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some filesystems cannot fsync a directory; the rename itself is done.
  if (rc != 0 && err != EINVAL && err != EROFS) fail(path, "fsync directory", err);
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::string_view content, mode_t mode) {
  if (path.empty() || !path.has_filename()) fail(path, "no file name", EINVAL);
  TempFile tmp = create_temp(path);
  write_all(tmp.fd(), content, path);
  if (::fsync(tmp.fd()) != 0) fail(path, "fsync", errno);
  // fchmod, not the open mode: the umask must not narrow what was asked for.
  if (::fchmod(tmp.fd(), mode) != 0) fail(path, "chmod", errno);
  if (tmp.close() != 0) fail(path, "close", errno);
  if (::rename(tmp.path().c_str(), path.c_str()) != 0) fail(path, "rename", errno);
  tmp.release();
  fsync_dir(path);
}

}  // namespace epyctune
