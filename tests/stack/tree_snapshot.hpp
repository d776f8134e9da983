// Byte-level snapshot of a directory tree, to prove revert leaves a fixture
// exactly as it was: every path, its type, and its content. Sparse files (the
// multi-GB /dev/cpu/N/msr fixtures) are read only where they hold data
// (SEEK_DATA/SEEK_HOLE), never end to end.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

namespace epyctune::testing {

struct TreeSnapshot {
  std::map<std::string, std::string> entries;  // relative path -> type + content
  std::map<std::string, std::string> meta;     // relative path -> inode, size, ctime
};

inline std::string sparse_content(const std::filesystem::path& p, off_t size) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "<unreadable>";
  std::string out = "size=" + std::to_string(size) + ";";
  off_t pos = 0;
  while (pos < size) {
    off_t data = ::lseek(fd, pos, SEEK_DATA);
    if (data < 0) break;
    off_t hole = ::lseek(fd, data, SEEK_HOLE);
    if (hole < 0) hole = size;
    std::string buf(static_cast<size_t>(hole - data), '\0');
    ssize_t n = ::pread(fd, buf.data(), buf.size(), data);
    buf.resize(n < 0 ? 0 : static_cast<size_t>(n));
    // Holes read as zeros, so a run of zeros and a hole are the same content.
    size_t b = buf.find_first_not_of('\0');
    if (b != std::string::npos) {
      size_t e = buf.find_last_not_of('\0') + 1;
      out += std::to_string(data + static_cast<off_t>(b)) + ":" + buf.substr(b, e - b) + ";";
    }
    pos = hole;
  }
  ::close(fd);
  return out;
}

namespace detail {

inline std::string read_at(int dirfd, const char* name, off_t size) {
  std::string content(static_cast<size_t>(size), '\0');
  int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? ::pread(fd, content.data(), content.size(), 0) : -1;
  if (fd >= 0) ::close(fd);
  content.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return content;
}

// Walks with directory fds and names relative to them: no full-path lookups,
// which dominate the cost on a 20k-file tree.
inline void walk(int dirfd, const std::string& prefix, const std::filesystem::path& abs,
                 TreeSnapshot& s, const TreeSnapshot* baseline) {
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = ::fdopendir(fd);
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string rel = prefix.empty() ? name : prefix + "/" + name;
    struct stat st {};
    if (::fstatat(::dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    std::string meta = std::to_string(st.st_ino) + "/" + std::to_string(st.st_size) + "/" +
                       std::to_string(st.st_ctim.tv_sec) + "." +
                       std::to_string(st.st_ctim.tv_nsec) + "/" + std::to_string(st.st_mode);
    if (S_ISDIR(st.st_mode)) {
      s.entries[rel] = "dir";
      s.meta[rel] = meta;
      int sub = ::openat(::dirfd(d), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (sub >= 0) {
        walk(sub, rel, abs / name, s, baseline);
        ::close(sub);
      }
      continue;
    }
    s.meta[rel] = meta;
    if (S_ISLNK(st.st_mode)) {
      s.entries[rel] = "link:" + std::filesystem::read_symlink(abs / name).string();
      continue;
    }
    if (!S_ISREG(st.st_mode)) {
      s.entries[rel] = "other";
      continue;
    }
    if (baseline) {
      // Every write (and utime) updates ctime, which user space cannot set
      // back: same inode, size and ctime prove the same content.
      auto m = baseline->meta.find(rel);
      if (m != baseline->meta.end() && m->second == meta) {
        s.entries[rel] = baseline->entries.at(rel);
        continue;
      }
    }
    if (st.st_blocks * 512 < st.st_size)
      s.entries[rel] = "sparse:" + sparse_content(abs / name, st.st_size);
    else
      s.entries[rel] = "file:" + read_at(::dirfd(d), name.c_str(), st.st_size);
  }
  ::closedir(d);
}

}  // namespace detail

// Every path under root with its type and full content. With a baseline,
// files whose inode/size/ctime are unchanged are taken from it unread.
inline TreeSnapshot snapshot_tree(const std::filesystem::path& root,
                                  const TreeSnapshot* baseline = nullptr) {
  TreeSnapshot s;
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return s;
  detail::walk(fd, "", root, s, baseline);
  ::close(fd);
  return s;
}

// "" when equal, else the first few differences, readable in a test failure.
inline std::string diff_trees(const TreeSnapshot& a, const TreeSnapshot& b) {
  std::string out;
  int shown = 0;
  auto note = [&](const std::string& s) {
    if (shown++ < 8) out += s + "\n";
  };
  for (const auto& [k, v] : a.entries) {
    auto it = b.entries.find(k);
    if (it == b.entries.end())
      note("missing after: " + k);
    else if (it->second != v)
      note("changed: " + k + " (" + v.substr(0, 80) + " -> " + it->second.substr(0, 80) + ")");
  }
  for (const auto& [k, v] : b.entries)
    if (!a.entries.count(k)) note("new after: " + k + " (" + v.substr(0, 80) + ")");
  if (shown > 8) out += std::to_string(shown - 8) + " more differences\n";
  return out;
}

}  // namespace epyctune::testing
