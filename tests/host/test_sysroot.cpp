#include <doctest/doctest.h>

#include <cerrno>
#include <fstream>

#include "host/sysroot.hpp"
#include "test_util.hpp"

using namespace epyctune::host;
using epyctune::testing::TempDir;

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
