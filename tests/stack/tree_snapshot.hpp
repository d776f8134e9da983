// Byte-level snapshot of a directory tree, to prove revert leaves a fixture
// exactly as it was: every path, its type, and its content. Sparse files (the
// multi-GB /dev/cpu/N/msr fixtures) are read only where they hold data
// (SEEK_DATA/SEEK_HOLE), never end to end.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

namespace epyctune::testing {

struct TreeSnapshot {
  std::map<std::string, std::string> entries;  // relative path -> type + content digest
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

inline TreeSnapshot snapshot_tree(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  TreeSnapshot s;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const auto& p = it->path();
    std::string rel = p.string().substr(root.string().size() + 1);
    struct stat st {};
    ::lstat(p.c_str(), &st);
    if (S_ISDIR(st.st_mode)) {
      s.entries[rel] = "dir";
    } else if (S_ISLNK(st.st_mode)) {
      s.entries[rel] = "link:" + fs::read_symlink(p).string();
    } else if (S_ISREG(st.st_mode)) {
      if (st.st_blocks * 512 < st.st_size) {
        s.entries[rel] = "sparse:" + sparse_content(p, st.st_size);
      } else {
        std::string content(static_cast<size_t>(st.st_size), '\0');
        int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? ::pread(fd, content.data(), content.size(), 0) : -1;
        if (fd >= 0) ::close(fd);
        content.resize(n < 0 ? 0 : static_cast<size_t>(n));
        s.entries[rel] = "file:" + content;
      }
    } else {
      s.entries[rel] = "other";
    }
  }
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
