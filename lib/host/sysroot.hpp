// The host is a directory: every read and write of host state (sysfs, procfs,
// /dev/cpu/N/msr, /etc, /var/lib/epyctune) goes through one Sysroot, so the
// whole program can be pointed at a fixture tree with --sysroot.
//
// Every access resolves beneath the root with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_MAGICLINKS): a symlink or ".." that would lead out of the tree is
// refused by the kernel (EXDEV), while symlinks that stay inside (sysfs is full
// of them) keep working. Operations on a name (mkdir, unlink, rename) act on
// the last component inside its confined parent directory, never through it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace epyctune::host {

// An I/O failure on a host path. Carries the errno and the resolved path so
// callers can say exactly which file failed and why.
class HostError : public std::runtime_error {
 public:
  HostError(std::string op, std::string path, int err);
  const std::string& op() const { return op_; }
  const std::string& path() const { return path_; }
  int err() const { return err_; }

 private:
  std::string op_;
  std::string path_;
  int err_;
};

// Owns one file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset(int fd = -1);
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// Reads larger than this are refused: no host file the stack reads comes close,
// and a character device or a huge file must not exhaust memory.
inline constexpr size_t kMaxReadBytes = 64u << 20;

class Sysroot {
 public:
  explicit Sysroot(std::filesystem::path root = "/");

  const std::filesystem::path& root() const { return root_; }
  // True when rooted at the real "/": callers that would write must be extra careful.
  bool is_live() const { return live_; }

  // Maps an absolute host path ("/sys/...") into the sysroot, textually: for
  // messages. Every access goes through open_beneath().
  std::filesystem::path resolve(std::string_view host_path) const;

  // openat2() of a host path beneath the root. Returns an invalid UniqueFd with
  // errno set on failure: EXDEV when the path leads outside the root, ENOSYS
  // (after saying so on stderr once) on a kernel older than Linux 5.6.
  UniqueFd open_beneath(std::string_view host_path, int flags, unsigned mode = 0) const;
  // Like open_beneath(), throwing HostError(op, ...) on failure.
  UniqueFd open_or_throw(std::string_view op, std::string_view host_path, int flags,
                         unsigned mode = 0) const;

  bool exists(std::string_view host_path) const;
  // True when the name itself exists, even as a symlink or special file.
  bool exists_nofollow(std::string_view host_path) const;
  bool is_dir(std::string_view host_path) const;
  // Whole file; nullopt when it does not exist. Other errors throw HostError,
  // and so does a FIFO or socket (which would block or mean nothing).
  std::optional<std::string> read(std::string_view host_path) const;
  // Like read() with trailing whitespace removed (sysfs values end in '\n').
  std::optional<std::string> read_value(std::string_view host_path) const;
  // Writes into an existing regular file, as one writes a sysfs attribute (no create).
  void write(std::string_view host_path, std::string_view data) const;
  // Creates or replaces a regular file durably (temp + fsync + rename + dir fsync).
  void write_file_atomic(std::string_view host_path, std::string_view data,
                         unsigned mode = 0644) const;
  void remove_file(std::string_view host_path) const;
  void make_dir(std::string_view host_path) const;  // one level, EEXIST is an error
  void remove_dir(std::string_view host_path) const;
  void make_dirs(std::string_view host_path) const;  // like mkdir -p
  // Sorted entry names of a directory; empty when it does not exist.
  std::vector<std::string> list(std::string_view host_dir) const;
  // statfs f_type of the path, or of its nearest existing ancestor.
  long fs_type(std::string_view host_path) const;

  // MSRs via /dev/cpu/N/msr: the 8 bytes at offset = address.
  std::string msr_path(int cpu) const;
  uint64_t read_msr(int cpu, uint32_t address) const;
  void write_msr(int cpu, uint32_t address, uint64_t value) const;

 private:
  // The parent directory of a path (opened beneath the root) and its last component.
  std::pair<UniqueFd, std::string> open_parent(std::string_view op,
                                               std::string_view host_path) const;
  std::filesystem::path root_;
  bool live_;
};

}  // namespace epyctune::host
