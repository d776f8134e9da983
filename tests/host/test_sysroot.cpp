#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cerrno>
#include <fstream>

#include "host/sysroot.hpp"
#include "test_util.hpp"

using namespace epyctune::host;
using epyctune::testing::TempDir;
namespace fs = std::filesystem;
using epyctune::testing::read_file;
using epyctune::testing::write_file;

namespace {}  // namespace

TEST_CASE("sysroot maps host paths under the root and never onto /") {
  TempDir t;
  Sysroot s(t.path());
  CHECK_FALSE(s.is_live());
  CHECK(s.resolve("/sys/devices/system/cpu/smt/control") ==
        t.path() / "sys/devices/system/cpu/smt/control");
  CHECK(Sysroot("/").is_live());
}

TEST_CASE("sysroot read, write, atomic write, list") {
  TempDir t;
  Sysroot s(t.path());
  s.make_dirs("/sys/kernel/mm");
  CHECK_FALSE(s.read("/sys/kernel/mm/missing").has_value());
  CHECK_THROWS_AS(s.write("/sys/kernel/mm/missing", "1"), HostError);
  s.write_file_atomic("/sys/kernel/mm/value", "always [madvise] never\n");
  CHECK(s.read_value("/sys/kernel/mm/value").value() == "always [madvise] never");
  s.write("/sys/kernel/mm/value", "never");
  CHECK(s.read("/sys/kernel/mm/value").value() == "never");
  CHECK(s.list("/sys/kernel/mm") == std::vector<std::string>{"value"});
  CHECK(s.list("/nope").empty());
  s.remove_file("/sys/kernel/mm/value");
  CHECK_FALSE(s.exists("/sys/kernel/mm/value"));
}

TEST_CASE("MSR file: 8 bytes at offset = address") {
  TempDir t;
  Sysroot s(t.path());
  s.make_dirs("/dev/cpu/0");
  { std::ofstream f(s.resolve("/dev/cpu/0/msr"), std::ios::binary); }
  s.write_msr(0, 0xC0000108, 0x2F);
  CHECK(s.read_msr(0, 0xC0000108) == 0x2F);
  s.write_msr(0, 0xC0000108, 0x1);
  CHECK(s.read_msr(0, 0xC0000108) == 0x1);
  try {
    s.read_msr(1, 0x10);
    FAIL("expected HostError");
  } catch (const HostError& e) {
    CHECK(e.err() == ENOENT);
    CHECK(e.path().find("dev/cpu/1/msr") != std::string::npos);
  }
}

TEST_CASE("sysroot: a symlink leading out is refused on write; one staying inside works") {
  TempDir base;
  fs::path root = base.path() / "root", outside = base.path() / "outside";
  write_file(outside / "secret", "outside\n");
  Sysroot sys(root);
  fs::create_directories(root / "sys/devices/system/cpu/cpu0");
  write_file(root / "sys/devices/system/cpu/cpu0/online", "1\n");
  fs::create_directories(root / "sys/devices/system/node/node0");
  // Real sysfs: node0/cpu0 -> ../../cpu/cpu0 (relative, inside).
  fs::create_directory_symlink("../../cpu/cpu0", root / "sys/devices/system/node/node0/cpu0");
  sys.write("/sys/devices/system/node/node0/cpu0/online", "0\n");
  CHECK(read_file(root / "sys/devices/system/cpu/cpu0/online") == "0\n");
  CHECK(sys.read_value("/sys/devices/system/node/node0/cpu0/online") == "0");

  // An absolute link to the outside, and a relative one climbing out.
  fs::create_symlink(outside / "secret", root / "sys/abs");
  fs::create_symlink("../../outside/secret", root / "sys/rel");
  fs::create_directory_symlink(outside, root / "sys/dir");
  for (const char* p : {"/sys/abs", "/sys/rel", "/sys/dir/secret", "/sys/../../outside/secret"}) {
    CAPTURE(p);
    try {
      sys.write(p, "pwned\n");
      FAIL("expected a refusal");
    } catch (const HostError& e) {
      CHECK(e.err() == EXDEV);
      CHECK(std::string(e.what()).find("outside the sysroot") != std::string::npos);
    }
    CHECK_THROWS_AS(sys.read(p), HostError);
  }
  CHECK_THROWS_AS(sys.write_file_atomic("/sys/dir/new", "x"), HostError);
  CHECK_THROWS_AS(sys.remove_file("/sys/dir/secret"), HostError);
  CHECK_THROWS_AS(sys.make_dir("/sys/dir/sub"), HostError);
  CHECK_THROWS_AS(sys.list("/sys/dir"), HostError);
  CHECK(read_file(outside / "secret") == "outside\n");
  CHECK(!fs::exists(outside / "new"));
  CHECK(!fs::exists(outside / "sub"));
}

TEST_CASE("sysroot: a FIFO or a directory where a file belongs is a read error, never a hang") {
  TempDir t;
  Sysroot s(t.path());
  s.make_dirs("/sys/kernel/mm/dir");
  REQUIRE(::mkfifo((t.path() / "sys/kernel/mm/fifo").c_str(), 0644) == 0);
  try {
    s.read("/sys/kernel/mm/fifo");
    FAIL("expected HostError");
  } catch (const HostError& e) {
    CHECK(std::string(e.what()).find("FIFO") != std::string::npos);
  }
  CHECK_THROWS_AS(s.write("/sys/kernel/mm/fifo", "1"), HostError);
  try {
    s.read("/sys/kernel/mm/dir");
    FAIL("expected HostError");
  } catch (const HostError& e) {
    CHECK(e.err() == EISDIR);
  }
  fs::create_symlink("loop", t.path() / "sys/kernel/mm/loop");
  CHECK_FALSE(s.exists("/sys/kernel/mm/loop"));
  CHECK(s.exists_nofollow("/sys/kernel/mm/loop"));
}
