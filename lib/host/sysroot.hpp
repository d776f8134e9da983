// The host is a directory: every read and write of host state (sysfs, procfs,
// /dev/cpu/N/msr, /etc, /var/lib/epyctune) goes through one Sysroot, so the
// whole program can be pointed at a fixture tree with --sysroot.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
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

class Sysroot {
 public:
  explicit Sysroot(std::filesystem::path root = "/");

  const std::filesystem::path& root() const { return root_; }
  // True when rooted at the real "/": callers that would write must be extra careful.
  bool is_live() const { return live_; }

  // Maps an absolute host path ("/sys/...") into the sysroot.
  std::filesystem::path resolve(std::string_view host_path) const;

  bool exists(std::string_view host_path) const;
  bool is_dir(std::string_view host_path) const;
  // Whole file; nullopt when it does not exist. Other errors throw HostError.
  std::optional<std::string> read(std::string_view host_path) const;
  // Like read() with trailing whitespace removed (sysfs values end in '\n').
  std::optional<std::string> read_value(std::string_view host_path) const;
  // Writes into an existing file, as one writes a sysfs attribute (no create).
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

  // MSRs via /dev/cpu/N/msr: the 8 bytes at offset = address.
  std::string msr_path(int cpu) const;
  uint64_t read_msr(int cpu, uint32_t address) const;
  void write_msr(int cpu, uint32_t address, uint64_t value) const;

 private:
  std::filesystem::path root_;
  bool live_;
};

}  // namespace epyctune::host
