#include "engine/runtime/shared_weights.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace epyctune::engine::runtime {
namespace {

constexpr char kMagic[8] = {'E', 'P', 'Y', 'C', 'W', 'G', 'T', 'S'};
constexpr uint32_t kFormat = 1;
constexpr uint64_t kComplete = 0x4554454c504d4f43ull;  // "COMPLETE"
constexpr size_t kAlign = size_t{2} << 20;

// At offset 0 of a store file; the key text follows it, the payload starts
// at data_offset. Native byte order: a store never leaves its host.
struct Header {
  char magic[8];
  uint32_t format;
  uint32_t header_bytes;
  uint64_t data_offset;
  uint64_t data_bytes;
  uint64_t file_bytes;
  uint64_t page_size;
  uint64_t key_bytes;
  uint64_t header_hash;  // of every byte before it
  uint64_t complete;     // kComplete, written after everything else is on disk
};

size_t round_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

std::string errno_text() {
  return std::strerror(errno);
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// The file system decides the page size (hugetlbfs: its huge page) and
// therefore every offset and size.
struct Geometry {
  std::string fs;
  size_t page = 4096;
  size_t data_offset = 0;
  size_t file_bytes = 0;
  PageKind kind = PageKind::shared;
};

Geometry geometry(int dirfd, const std::filesystem::path& dir, size_t data_bytes) {
  struct statfs sf {};
  if (::fstatfs(dirfd, &sf) != 0)
    throw SharedWeightsError(
        fmt::format("shared weights directory {}: statfs failed: {}", dir.string(), errno_text()));
  Geometry g;
  if (static_cast<unsigned long>(sf.f_type) == HUGETLBFS_MAGIC) {
    g.fs = "hugetlbfs";
    g.page = static_cast<size_t>(sf.f_bsize);
    g.kind = PageKind::hugetlb;
  } else {
    g.fs = static_cast<unsigned long>(sf.f_type) == TMPFS_MAGIC ? "tmpfs" : "other";
  }
  const size_t unit = std::max(g.page, kAlign);
  g.data_offset = round_up(sizeof(Header) + kMaxKeyBytes, unit);
  g.file_bytes = g.data_offset + round_up(std::max<size_t>(data_bytes, 1), unit);
  return g;
}

int open_dir(const std::filesystem::path& dir) {
  const std::string d = dir.string();
  int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      throw SharedWeightsError(fmt::format(
          "shared weights directory {}: no such directory (create it: mkdir -m 0755 {})", d, d));
    if (errno == ENOTDIR)
      throw SharedWeightsError(
          fmt::format("shared weights directory {}: not a directory (name a directory, e.g. one on "
                      "/dev/shm or a hugetlbfs mount)",
                      d));
    throw SharedWeightsError(
        fmt::format("shared weights directory {}: cannot open: {}", d, errno_text()));
  }
  struct stat st {};
  ::fstat(fd, &st);
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    ::close(fd);
    throw SharedWeightsError(fmt::format(
        "shared weights directory {}: owned by uid {}, not by this user (uid {}) or root: another "
        "user could replace the weights; use a directory of your own",
        d, st.st_uid, ::geteuid()));
  }
  if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
    ::close(fd);
    throw SharedWeightsError(
        fmt::format("shared weights directory {}: world-writable without the sticky bit, so anyone "
                    "could replace the weights: chmod o-w {} (or chmod +t {})",
                    d, d, d));
  }
  return fd;
}

uint64_t header_hash(const Header& h) {
  return hash64(std::span(reinterpret_cast<const uint8_t*>(&h), offsetof(Header, header_hash)));
}

// Why the mapped file cannot serve this request; "" when it can.
std::string check_header(const uint8_t* map, const Geometry& g, const SharedWeightsRequest& req) {
  Header h;
  std::memcpy(&h, map, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return "not a store file (bad magic)";
  if (h.complete != kComplete) return "incomplete (its build was interrupted)";
  if (h.header_hash != header_hash(h)) return "corrupt header (checksum mismatch)";
  if (h.format != kFormat || h.header_bytes != sizeof(Header))
    return fmt::format("store format {} (this engine writes {})", h.format, kFormat);
  if (h.page_size != g.page || h.data_offset != g.data_offset || h.file_bytes != g.file_bytes)
    return fmt::format("geometry page {} offset {} size {}, expected {} {} {}", h.page_size,
                       h.data_offset, h.file_bytes, g.page, g.data_offset, g.file_bytes);
  if (h.data_bytes != req.data_bytes)
    return fmt::format("{} payload bytes, expected {}", h.data_bytes, req.data_bytes);
  if (h.key_bytes != req.key.size() ||
      std::memcmp(map + sizeof(Header), req.key.data(), req.key.size()) != 0)
    return "built for other inputs (key mismatch)";
  return "";
}

enum class Probe { absent, usable, unusable };

// Opens and checks `name`; on success `out` holds the read-only mapping.
Probe probe(int dirfd, const std::string& name, const Geometry& g, const SharedWeightsRequest& req,
            SharedWeights& out, std::string& why) {
  Fd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return Probe::absent;
    why = errno == ELOOP ? "a symbolic link" : "cannot open: " + errno_text();
    return Probe::unusable;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
    return Probe::unusable;
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    why = fmt::format("owned by uid {}, not by this user or root", st.st_uid);
    return Probe::unusable;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    why = "writable by group or others";
    return Probe::unusable;
  }
  if (static_cast<uint64_t>(st.st_size) != g.file_bytes) {
    why = fmt::format("{} bytes, expected {} (truncated, or built for another model)", st.st_size,
                      g.file_bytes);
    return Probe::unusable;
  }
  void* p = ::mmap(nullptr, g.file_bytes, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) {
    why = "mmap failed: " + errno_text();
    return Probe::unusable;
  }
  auto mem = WeightMemory::adopt(static_cast<uint8_t*>(p), g.file_bytes, g.kind);
  why = check_header(mem.data(), g, req);
  if (!why.empty()) return Probe::unusable;
  if (g.kind != PageKind::hugetlb) madvise(p, g.file_bytes, MADV_HUGEPAGE);
  out.memory = std::move(mem);
  out.data = out.memory.data() + g.data_offset;
  out.info.inode = st.st_ino;
  return Probe::usable;
}

// Reserves the file's space up front (tmpfs and disk), after place()'s mbind so
// tmpfs places the pages by that policy: a full tmpfs is an error here, not
// a SIGBUS in the middle of the copy.
void reserve(int fd, const Geometry& g, const std::string& path) {
  if (g.fs == "hugetlbfs") return;  // mmap reserved the huge pages already
  // fallocate(2), not posix_fallocate: where the file system cannot, glibc
  // would emulate it by writing every block.
  if (::fallocate(fd, 0, 0, static_cast<off_t>(g.file_bytes)) == 0 || errno == EOPNOTSUPP) return;
  throw SharedWeightsError(
      fmt::format("{}: cannot reserve {} bytes: {} (free space, or a larger "
                  "tmpfs size=)",
                  path, g.file_bytes, errno_text()));
}

void write_file(int dirfd, const std::string& dir, const std::string& name, const Geometry& g,
                const SharedWeightsRequest& req) {
  const std::string tmp = name + ".tmp";
  const std::string tmp_path = dir + "/" + tmp;
  // We hold the lock: a KEY.tmp here is what a crashed builder left.
  if (::unlinkat(dirfd, tmp.c_str(), 0) != 0 && errno != ENOENT)
    throw SharedWeightsError(
        fmt::format("{}: cannot remove a stale build: {}", tmp_path, errno_text()));
  Fd fd(::openat(dirfd, tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0)
    throw SharedWeightsError(fmt::format("{}: cannot create: {}", tmp_path, errno_text()));
  struct Cleanup {
    int dirfd;
    const std::string& tmp;
    bool armed = true;
    ~Cleanup() {
      if (armed) ::unlinkat(dirfd, tmp.c_str(), 0);
    }
  } cleanup{dirfd, tmp};
  if (::ftruncate(fd.get(), static_cast<off_t>(g.file_bytes)) != 0)
    throw SharedWeightsError(
        fmt::format("{}: cannot size to {} bytes: {}", tmp_path, g.file_bytes, errno_text()));
  void* p = ::mmap(nullptr, g.file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED)
    throw SharedWeightsError(fmt::format(
        "{}: cannot map {} bytes: {}{}", tmp_path, g.file_bytes, errno_text(),
        g.fs == "hugetlbfs" ? " (not enough free huge pages: raise /proc/sys/vm/nr_hugepages)"
                            : ""));
  auto map = WeightMemory::adopt(static_cast<uint8_t*>(p), g.file_bytes, g.kind);
  if (g.kind != PageKind::hugetlb) madvise(p, g.file_bytes, MADV_HUGEPAGE);
  uint8_t* data = map.data() + g.data_offset;
  // A refusal here repeats in place(), which reports it.
  std::string ignored;
  bind_pages(map.data(), g.file_bytes, g.page, 0, g.data_offset, req.policy, req.nodes, ignored);
  if (req.place) req.place(data, g.page);
  reserve(fd.get(), g, tmp_path);
  req.fill(data);

  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.format = kFormat;
  h.header_bytes = sizeof(Header);
  h.data_offset = g.data_offset;
  h.data_bytes = req.data_bytes;
  h.file_bytes = g.file_bytes;
  h.page_size = g.page;
  h.key_bytes = req.key.size();
  h.header_hash = header_hash(h);
  std::memcpy(map.data() + sizeof(Header), req.key.data(), req.key.size());
  std::memcpy(map.data(), &h, sizeof h);
  // The payload and header reach the file before the word that says so.
  if (::msync(map.data(), g.file_bytes, MS_SYNC) != 0)
    throw SharedWeightsError(fmt::format("{}: msync failed: {}", tmp_path, errno_text()));
  const uint64_t complete = kComplete;
  std::memcpy(map.data() + offsetof(Header, complete), &complete, sizeof complete);
  if (::msync(map.data(), g.page, MS_SYNC) != 0 || ::fsync(fd.get()) != 0)
    throw SharedWeightsError(fmt::format("{}: sync failed: {}", tmp_path, errno_text()));
  // Read-only for everyone, the owner included: a store file is never edited.
  ::fchmod(fd.get(), 0444);
  if (::renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0)
    throw SharedWeightsError(
        fmt::format("{}: cannot rename to {}: {}", tmp_path, name, errno_text()));
  cleanup.armed = false;
  ::fsync(dirfd);
}

}  // namespace

uint64_t hash64(std::span<const uint8_t> bytes, uint64_t seed) {
  uint64_t h = seed;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t hash64(std::string_view text, uint64_t seed) {
  return hash64(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()), seed);
}

std::string shared_weights_name(std::string_view key) {
  return fmt::format("epyctune-weights-{:016x}{:016x}", hash64(key),
                     hash64(key, 0x84222325cbf29ce4ull));
}

SharedWeights open_shared_weights(const SharedWeightsRequest& req) {
  if (req.key.empty() || req.key.size() > kMaxKeyBytes)
    throw std::invalid_argument(
        fmt::format("shared weights key of {} bytes (1 to {})", req.key.size(), kMaxKeyBytes));
  Fd dirfd(open_dir(req.dir));
  const Geometry g = geometry(dirfd.get(), req.dir, req.data_bytes);
  const std::string name = shared_weights_name(req.key);
  const std::string dir = req.dir.string();
  SharedWeights out;
  out.info.file = dir + "/" + name;
  out.info.fs = g.fs;
  out.info.page_size = g.page;
  auto usable = [&] {
    out.info.shared = true;
    return std::move(out);
  };
  std::string why;
  Probe pr = probe(dirfd.get(), name, g, req, out, why);
  if (pr == Probe::usable) return usable();

  const std::string lock = name + ".lock";
  Fd lockfd(::openat(dirfd.get(), lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (lockfd.get() < 0)
    throw SharedWeightsError(
        fmt::format("{}/{}: cannot open the build lock: {}", dir, lock, errno_text()));
  const auto t0 = std::chrono::steady_clock::now();
  while (::flock(lockfd.get(), LOCK_EX) != 0)
    if (errno != EINTR)
      throw SharedWeightsError(fmt::format("{}/{}: flock failed: {}", dir, lock, errno_text()));
  out.info.lock_wait_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Another process may have built it while we waited.
  why.clear();
  pr = probe(dirfd.get(), name, g, req, out, why);
  if (pr == Probe::usable) return usable();
  if (pr == Probe::unusable) {
    out.info.note = fmt::format("ignored {}: {}; rebuilt it", out.info.file, why);
    std::fprintf(stderr, "epyctune-engine: warning: shared weights: %s\n", out.info.note.c_str());
    if (::unlinkat(dirfd.get(), name.c_str(), 0) != 0)
      throw SharedWeightsError(fmt::format(
          "{}: unusable ({}) and cannot be removed: {}; remove it, or use a directory only you "
          "can write",
          out.info.file, why, errno_text()));
  }
  write_file(dirfd.get(), dir, name, g, req);
  why.clear();
  if (probe(dirfd.get(), name, g, req, out, why) != Probe::usable)
    throw SharedWeightsError(
        fmt::format("{}: fails its own check right after it was built: {}", out.info.file, why));
  out.info.built = true;
  return usable();
}

}  // namespace epyctune::engine::runtime
