#include <doctest/doctest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/atomic_file.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using epyctune::write_file_atomic;
using epyctune::testing::read_file;
using epyctune::testing::TempDir;
using epyctune::testing::write_file;

namespace {

size_t entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("write_file_atomic writes, replaces and leaves no temporary") {
  TempDir dir;
  const auto path = dir.path() / "epyctune.prom";
  write_file_atomic(path, "first\n");
  CHECK(read_file(path) == "first\n");
  write_file_atomic(path, "second\n");
  CHECK(read_file(path) == "second\n");
  write_file_atomic(path, "");
  CHECK(read_file(path).empty());
  CHECK(entries(dir.path()) == 1);
}

TEST_CASE("write_file_atomic sets the mode regardless of the umask") {
  TempDir dir;
  const auto path = dir.path() / "f";
  mode_t old = ::umask(077);
  write_file_atomic(path, "x", 0644);
  write_file_atomic(dir.path() / "g", "x", 0600);
  ::umask(old);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0644);
  REQUIRE(::stat((dir.path() / "g").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
}

TEST_CASE("write_file_atomic replaces a symlink instead of writing through it") {
  TempDir dir;
  write_file(dir.path() / "target", "keep");
  fs::create_symlink(dir.path() / "target", dir.path() / "link");
  write_file_atomic(dir.path() / "link", "new");
  CHECK(read_file(dir.path() / "target") == "keep");
  CHECK(!fs::is_symlink(dir.path() / "link"));
  CHECK(read_file(dir.path() / "link") == "new");
}

TEST_CASE("write_file_atomic errors name the path and the errno text") {
  TempDir dir;
  SUBCASE("missing directory") {
    const auto path = dir.path() / "no-such-dir" / "f.prom";
    try {
      write_file_atomic(path, "x");
      FAIL("no error");
    } catch (const std::runtime_error& e) {
      const std::string msg = e.what();
      CHECK(msg.find(path.string()) != std::string::npos);
      CHECK(msg.find("No such file or directory") != std::string::npos);
    }
  }
  SUBCASE("parent is a file") {
    write_file(dir.path() / "file", "x");
    CHECK_THROWS_WITH_AS(write_file_atomic(dir.path() / "file" / "f", "x"),
                         doctest::Contains("Not a directory"), std::runtime_error);
  }
  SUBCASE("target is a directory: the temporary is removed and the directory kept") {
    fs::create_directory(dir.path() / "d");
    CHECK_THROWS_AS(write_file_atomic(dir.path() / "d", "x"), std::runtime_error);
    CHECK(fs::is_directory(dir.path() / "d"));
    CHECK(entries(dir.path()) == 1);
  }
}

TEST_CASE("a concurrent reader sees the old file or the new one, never a mix") {
  TempDir dir;
  const auto path = dir.path() / "metrics.prom";
  const std::string a(256 * 1024, 'a');
  const std::string b(256 * 1024, 'b');
  write_file_atomic(path, a);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::atomic<int> reads{0};
  std::thread reader([&] {
    while (!done.load()) {
      const std::string got = read_file(path);
      if (got != a && got != b) bad.fetch_add(1);
      reads.fetch_add(1);
    }
  });
  for (int i = 0; i < 50; ++i) write_file_atomic(path, i % 2 ? a : b);
  done.store(true);
  reader.join();
  CHECK(reads.load() > 0);
  CHECK(bad.load() == 0);
  CHECK(entries(dir.path()) == 1);
}
