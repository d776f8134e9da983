#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/runtime/shared_weights.hpp"
#include "test_util.hpp"

using namespace epyctune::engine::runtime;
using epyctune::testing::TempDir;
using epyctune::testing::write_file;
namespace fs = std::filesystem;

namespace {

// A payload whose bytes say which request wrote them.
SharedWeightsRequest request(const fs::path& dir, const std::string& key, size_t bytes,
                             int* fills = nullptr) {
  SharedWeightsRequest r;
  r.dir = dir;
  r.key = key;
  r.data_bytes = bytes;
  r.fill = [bytes, fills](uint8_t* data) {
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 31 + 7);
    if (fills) ++*fills;
  };
  return r;
}

bool payload_ok(const SharedWeights& s, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    if (s.data[i] != static_cast<uint8_t>(i * 31 + 7)) return false;
  return true;
}

// The mapping's line in /proc/self/maps ("" when absent).
std::string maps_line(const std::string& file) {
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line))
    if (line.size() >= file.size() &&
        line.compare(line.size() - file.size(), file.size(), file) == 0)
      return line;
  return "";
}

void overwrite(const std::string& path, off_t at, const std::string& bytes) {
  ::chmod(path.c_str(), 0600);
  int fd = ::open(path.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), at) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
  ::chmod(path.c_str(), 0444);
}

}  // namespace

TEST_CASE("a store file is built once, then mapped read-only and shared by later opens") {
  TempDir dir;
  const size_t n = 3 * 4096 + 17;
  int fills = 0;
  auto req = request(dir.path(), "model=a\nnodes=0\n", n, &fills);
  auto first = open_shared_weights(req);
  CHECK(first.info.shared);
  CHECK(first.info.built);
  CHECK(first.info.note.empty());
  CHECK(fills == 1);
  CHECK(payload_ok(first, n));
  CHECK(fs::path(first.info.file).parent_path() == dir.path());
  CHECK(fs::path(first.info.file).filename() == shared_weights_name(req.key));
  CHECK_FALSE(fs::exists(first.info.file + ".tmp"));
  struct stat st {};
  REQUIRE(::stat(first.info.file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0444);
  CHECK(st.st_ino == first.info.inode);

  auto second = open_shared_weights(req);
  CHECK(second.info.shared);
  CHECK_FALSE(second.info.built);
  CHECK(fills == 1);
  CHECK(second.info.inode == first.info.inode);
  CHECK(payload_ok(second, n));
  // Read-only, shared, file-backed: "r--s" and the file's name in maps.
  const std::string line = maps_line(second.info.file);
  REQUIRE_FALSE(line.empty());
  CHECK(line.find(" r--s ") != std::string::npos);
  CHECK(second.memory.kind() ==
        (second.info.fs == "hugetlbfs" ? PageKind::hugetlb : PageKind::shared));

  // Another key is another file.
  auto other = open_shared_weights(request(dir.path(), "model=b\nnodes=0\n", n, &fills));
  CHECK(other.info.built);
  CHECK(other.info.file != first.info.file);
  CHECK(fills == 2);
}

TEST_CASE("truncated, incomplete, corrupt or foreign-writable store files are rebuilt") {
  TempDir dir;
  const size_t n = 8192;
  int fills = 0;
  auto req = request(dir.path(), "model=c\n", n, &fills);
  const std::string file = open_shared_weights(req).info.file;
  REQUIRE(fills == 1);

  auto expect_rebuilt = [&](const char* why) {
    CAPTURE(why);
    auto s = open_shared_weights(req);
    CHECK(s.info.built);
    CHECK(s.info.note.find("ignored") != std::string::npos);
    CHECK(s.info.note.find(why) != std::string::npos);
    CHECK(payload_ok(s, n));
  };

  SUBCASE("truncated") {
    ::chmod(file.c_str(), 0600);
    fs::resize_file(file, 4096 * 3);
    ::chmod(file.c_str(), 0444);
    expect_rebuilt("truncated");
  }
  SUBCASE("complete word cleared, as when a build is interrupted") {
    overwrite(file, 64, std::string(8, '\0'));
    expect_rebuilt("incomplete");
  }
  SUBCASE("a header field flipped") {
    overwrite(file, 16, "\x01");
    expect_rebuilt("checksum");
  }
  SUBCASE("bad magic") {
    overwrite(file, 0, "XXXX");
    expect_rebuilt("magic");
  }
  SUBCASE("writable by others") {
    ::chmod(file.c_str(), 0666);
    expect_rebuilt("writable");
  }
  SUBCASE("a stale KEY.tmp from a crashed build is removed") {
    fs::remove(file);
    write_file(file + ".tmp", "half a build");
    auto s = open_shared_weights(req);
    CHECK(s.info.built);
    CHECK_FALSE(fs::exists(file + ".tmp"));
  }
}

TEST_CASE("the store directory must exist, be a directory, and be safe from other users") {
  TempDir dir;
  auto req = request(dir.path() / "missing", "k\n", 100);
  CHECK_THROWS_WITH_AS(open_shared_weights(req), doctest::Contains("no such directory"),
                       SharedWeightsError);
  write_file(dir.path() / "file", "x");
  req.dir = dir.path() / "file";
  CHECK_THROWS_WITH_AS(open_shared_weights(req), doctest::Contains("not a directory"),
                       SharedWeightsError);

  const fs::path open_dir = dir.path() / "open";
  fs::create_directory(open_dir);
  ::chmod(open_dir.c_str(), 0777);
  req.dir = open_dir;
  CHECK_THROWS_WITH_AS(open_shared_weights(req), doctest::Contains("sticky"), SharedWeightsError);
  ::chmod(open_dir.c_str(), 01777);  // like /dev/shm and /tmp
  CHECK(open_shared_weights(req).info.built);

  if (::geteuid() == 0) {
    const fs::path theirs = dir.path() / "theirs";
    fs::create_directory(theirs);
    REQUIRE(::chown(theirs.c_str(), 4242, 4242) == 0);
    req.dir = theirs;
    CHECK_THROWS_WITH_AS(open_shared_weights(req), doctest::Contains("owned by uid 4242"),
                         SharedWeightsError);
  }

  req.dir = dir.path();
  req.key = std::string(kMaxKeyBytes + 1, 'k');
  CHECK_THROWS_AS(open_shared_weights(req), std::invalid_argument);
}

TEST_CASE("store file names are bounded and depend on the whole key") {
  const std::string a = shared_weights_name("x=1\ny=2\n");
  CHECK(a.size() == std::string("epyctune-weights-").size() + 32);
  CHECK(a != shared_weights_name("x=1\ny=3\n"));
  CHECK(a == shared_weights_name("x=1\ny=2\n"));
  CHECK(hash64("abc") != hash64("abd"));
}
