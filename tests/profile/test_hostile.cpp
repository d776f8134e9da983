// Profiles written to hurt: strings that would reach the boot loader, file
// names or the journal, and inputs that are not files or are far too big.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "profile/loader.hpp"
#include "profile_test_util.hpp"
#include "test_util.hpp"

using namespace epyctune::profile;
using epyctune::testing::first_error;
using epyctune::testing::TempDir;

namespace {
std::string base(const std::string& more) {
  return "include = \"epyc-9754\"\n" + more;
}
}  // namespace

TEST_CASE("a name with a newline never reaches the GRUB drop-in") {
  // TOML "\n" escapes: the value holds a real newline and a boot parameter.
  auto d = first_error(base("name = \"x\\nGRUB_CMDLINE_LINUX=\\\"init=/bin/sh\\\"\"\n"));
  CHECK(d.file == "user.toml");
  CHECK(d.line == 2);
  CHECK(d.what.find("name = \"x\\x0aGRUB") != std::string::npos);
  CHECK(d.what.find("outside A-Z a-z 0-9") != std::string::npos);
  CHECK(d.fix.find("A-Z a-z 0-9 . _ -") != std::string::npos);
  CHECK(first_error(base("name = \"a b\"\n")).line == 2);
  CHECK(first_error(base("name = \"\"\n")).what.find("is empty") != std::string::npos);
  CHECK(first_error(base("name = \"-rf\"\n")).what.find("must start") != std::string::npos);
  CHECK(first_error(base("aliases = [\"ok\", \"b\\tad\"]\n")).line == 2);
  CHECK_NOTHROW(load_profile_text(base("name = \"my-host_2.v1\"\n"), "user.toml"));
}

TEST_CASE("names have a length limit, and a huge one is refused quickly") {
  auto d = first_error(base("name = \"" + std::string(65, 'a') + "\"\n"));
  CHECK(d.what.find("more than 64") != std::string::npos);
  CHECK(d.what.size() < 200);  // the message quotes only the start
  auto t0 = std::chrono::steady_clock::now();
  auto big = first_error(base("name = \"" + std::string(900000, 'a') + "\"\n"));
  CHECK(big.line == 2);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("free text is one line and bounded") {
  CHECK(first_error(base("description = \"two\\nlines\"\n")).what.find("control character") !=
        std::string::npos);
  CHECK(first_error(base("description = \"" + std::string(2000, 'x') + "\"\n"))
            .what.find("more than 1024") != std::string::npos);
  auto n = first_error(base("[hardware]\nnotes = [\"fine\", \"bad\\u001b[31m\"]\n"));
  CHECK(n.line == 3);
  CHECK(first_error(base("[[prefetch.extra]]\naddress = 0xC0011020\nmask = 1\nvalue = 0\n"
                         "reason = \"a\\rb\"\n"))
            .line == 6);
}

TEST_CASE("paths epyctune writes are confined and plain") {
  auto d = first_error(base("[isolation]\nbootloader_dropin = \"/etc/shadow\"\n"));
  CHECK(d.line == 3);
  CHECK(d.what.find("not a file directly in /etc/default/grub.d") != std::string::npos);
  CHECK(d.fix.find("/etc/default/grub.d/epyctune.cfg") != std::string::npos);
  CHECK(first_error(base("[isolation]\nbootloader_dropin = \"/etc/default/grub.d/../../x.cfg\"\n"))
            .what.find("\"..\"") != std::string::npos);
  CHECK(first_error(base("[isolation]\nbootloader_dropin = \"/etc/default/grub.d/x.sh\"\n"))
            .what.find("does not end in .cfg") != std::string::npos);
  CHECK_NOTHROW(load_profile_text(
      base("[isolation]\nbootloader_dropin = \"/etc/default/grub.d/99-llm.cfg\"\n"), "user.toml"));
  CHECK(first_error(base("[weights]\nlaunch_config = \"engine.toml\"\n"))
            .what.find("not an absolute path") != std::string::npos);
  CHECK(
      first_error(base("[spec]\nlaunch_config = \"/var/lib/epyctune/../../etc/x.toml\"\n")).line ==
      3);
  CHECK(first_error(base("[spec]\nlaunch_config = \"/var/lib/epy ctune/e.toml\"\n")).line == 3);
}

TEST_CASE("resctrl group names are plain names, distinct, and not resctrl's own") {
  CHECK(first_error(base("[cat]\ndraft_group = \"../../../etc\"\n")).line == 3);
  CHECK(first_error(base("[cat]\nverify_group = \"a/b\"\n")).line == 3);
  auto info = first_error(base("[cat]\ndraft_group = \"info\"\n"));
  CHECK(info.line == 3);
  CHECK(info.what.find("resctrl's own") != std::string::npos);
  auto same = first_error(base("[cat]\ndraft_group = \"g\"\nverify_group = \"g\"\n"));
  CHECK(same.line == 4);
}

TEST_CASE("a file name that is not a valid name does not become the profile's name") {
  TempDir t;
  auto p = t.path() / "bad name.toml";
  std::ofstream(p) << "include = \"epyc-9754\"\nname = \"\"\n";
  CHECK_THROWS_AS(load_profile(p.string()), ProfileError);
  // An unnamed file: the stem is the name only when it is a valid one.
  auto q = t.path() / "my host.toml";
  std::ofstream(q) << "include = \"base\"\n[partition]\ndraft_l3 = [0]\n";
  CHECK_THROWS_WITH_AS(load_profile(q.string()), doctest::Contains("sets no name"), ProfileError);
}

TEST_CASE("--profile that is not a regular file is refused by name, without reading") {
  TempDir t;
  CHECK_THROWS_WITH_AS(load_profile("/dev/zero"), doctest::Contains("a character device"),
                       ProfileError);
  CHECK_THROWS_WITH_AS(load_profile(t.str() + "/"), doctest::Contains("a directory"), ProfileError);
  auto fifo = t.path() / "p.toml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Would block forever in open() or read() without the check.
  CHECK_THROWS_WITH_AS(load_profile(fifo.string()), doctest::Contains("a FIFO"), ProfileError);
  auto big = t.path() / "big.toml";
  {
    std::ofstream out(big);
    out << "# " << std::string(2u << 20, 'x') << "\n";
  }
  CHECK_THROWS_WITH_AS(load_profile(big.string()), doctest::Contains("more than a profile may be"),
                       ProfileError);
  // An include that points at one is named at the include line.
  auto inc = t.path() / "inc.toml";
  std::ofstream(inc) << "name = \"x\"\ninclude = \"/dev/zero\"\n";
  try {
    load_profile(inc.string());
    FAIL("accepted");
  } catch (const ProfileError& e) {
    CHECK(e.diagnostics().front().line == 2);
    CHECK(std::string(e.what()).find("character device") != std::string::npos);
  }
}

TEST_CASE("CPU lists in a profile are bounded: one error, not one per CPU") {
  auto huge = first_error(base("[partition]\nhousekeeping_cpus = \"0-2147483647\"\n"));
  CHECK(huge.line == 3);
  CHECK(huge.what.find("out of range") != std::string::npos);
  try {
    load_profile_text(base("[partition]\nhousekeeping_cpus = \"0-99999\"\n"), "user.toml");
    FAIL("accepted");
  } catch (const ProfileError& e) {
    CHECK(e.diagnostics().size() == 1);
    CHECK(std::string(e.what()).size() < 400);
  }
}

TEST_CASE("messages quote only the start of a huge key, value or include") {
  auto key = first_error(base(std::string(100000, 'k') + " = 1\n"));
  CHECK(key.what.find("unknown key 'kkk") != std::string::npos);
  CHECK(key.str().size() < 1000);
  auto value = first_error(base("[bios]\nsmt = \"" + std::string(100000, 'o') + "\"\n"));
  CHECK(value.what.size() < 300);
  auto inc = first_error("include = \"" + std::string(100000, 'i') + "\"\n");
  CHECK(inc.what.size() < 300);
}
