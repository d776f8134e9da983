#include <doctest/doctest.h>

#include <fstream>

#include "profile/loader.hpp"
#include "profile_test_util.hpp"
#include "test_util.hpp"

using namespace epyctune::profile;
using epyctune::testing::first_error;
using epyctune::testing::TempDir;

namespace {
void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
}
}  // namespace

TEST_CASE("built-in profiles load by name, full name and alias") {
  CHECK(list_profiles() == std::vector<std::string>{"epyc-7543-2s", "epyc-7763-2s", "epyc-9354",
                                                    "epyc-9654", "epyc-9654-2s", "epyc-9655",
                                                    "epyc-9754", "epyc-9755", "epyc-9965"});
  auto b = load_profile("9754");
  CHECK(b.name == "epyc-9754");
  CHECK(load_profile("epyc-9754").name == "epyc-9754");
  CHECK(load_profile("7543").name == "epyc-7543-2s");
  CHECK(load_profile("9354").hardware.ccds_per_socket == 8);
  CHECK(b.hardware.l3_domains_per_socket == 16);
  CHECK(b.hardware.l3_bytes == (16ull << 20));
  CHECK(b.partition.draft_l3 == std::vector<int>{0, 1});
  CHECK(b.includes == std::vector<std::string>{"profiles/base.toml"});
  // Inherited from base, with the origin in base.
  CHECK(b.numa.hugepages_2m_per_node == -1);
  CHECK(b.origins.at("numa.thp").file == "profiles/base.toml");
  CHECK(b.origins.at("partition.draft_l3").file == "profiles/epyc-9754.toml");
  CHECK(b.origins.at("partition.draft_l3").line > 1);
  CHECK_FALSE(b.hardware.notes.empty());
  auto m = load_profile("7543");
  CHECK(m.hardware.l3_bytes == (32ull << 20));
  CHECK_FALSE(m.prefetch.enabled);
  CHECK(m.expectations.count("roofline"));
  CHECK(m.expectations_source.find("roofline") != std::string::npos);
  CHECK(builtin_profile_text("9354").find("Genoa") != std::string::npos);
}

TEST_CASE("unknown profile names suggest the closest") {
  CHECK_THROWS_WITH_AS(load_profile("epyc-97544"), doctest::Contains("did you mean 'epyc-9754'"),
                       ProfileError);
  CHECK_THROWS_WITH_AS(load_profile("/nonexistent/x.toml"), doctest::Contains("cannot read"),
                       ProfileError);
}

TEST_CASE("a user file inherits a built-in and overrides keys") {
  TempDir t;
  write(t.path() / "mine.toml",
        "include = \"9754\"\nname = \"mine\"\n[spec]\ndraft_len = 4\n[partition]\n"
        "housekeeping_cpus = \"0-1,128-129\"\n");
  auto p = load_profile((t.path() / "mine.toml").string());
  CHECK(p.name == "mine");
  CHECK(p.aliases.empty());  // identity is not inherited
  CHECK(p.spec.draft_len == 4);
  CHECK(p.hardware.cores_per_socket == 128);
  CHECK(p.partition.housekeeping_cpus == std::vector<int>{0, 1, 128, 129});
  CHECK(p.origins.at("spec.draft_len").file == (t.path() / "mine.toml").string());
  CHECK(p.origins.at("spec.draft_len").line == 4);
  CHECK(p.includes == std::vector<std::string>{"profiles/epyc-9754.toml", "profiles/base.toml"});
  // A relative include resolves next to the including file.
  write(t.path() / "child.toml", "include = \"mine.toml\"\n[engine]\nthreads = 3\n");
  auto c = load_profile((t.path() / "child.toml").string());
  CHECK(c.name == "child");
  CHECK(c.spec.draft_len == 4);
  CHECK(c.engine.threads == 3);
}

TEST_CASE("syntax errors carry line and column") {
  auto d = first_error("name = \"x\"\n[spec]\ndraft_len = = 3\n");
  CHECK(d.file == "user.toml");
  CHECK(d.line == 3);
  CHECK(d.column > 1);
  CHECK(d.str().rfind("user.toml:3:", 0) == 0);
  CHECK(d.fix == "fix the TOML syntax");
}

TEST_CASE("unknown keys are rejected with a suggestion") {
  auto d = first_error("include = \"base\"\n[spec]\ndraft_lne = 4\n");
  CHECK(d.line == 3);
  CHECK(d.column == 1);
  CHECK(d.what.find("unknown key 'draft_lne' in [spec]") != std::string::npos);
  CHECK(d.fix == "did you mean 'draft_len'?");
  auto top = first_error("[hardwear]\nfamily = 25\n");
  CHECK(top.fix == "did you mean 'hardware'?");
  auto far = first_error("[spec]\nzzzzzzzzz = 1\n");
  CHECK(far.fix.find("valid keys: draft_source") != std::string::npos);
}

TEST_CASE("wrong types name the expected type") {
  auto d = first_error("[hardware]\nfamily = \"25\"\n");
  CHECK(d.line == 2);
  CHECK(d.what == "hardware.family must be an integer, not a string");
  auto b = first_error("[numa]\nnuma_balancing = 0\n");
  CHECK(b.what.find("must be a boolean") != std::string::npos);
  auto s = first_error("spec = 3\n");
  CHECK(s.what.find("'spec' must be a table") != std::string::npos);
  auto a = first_error("[partition]\ndraft_l3 = [0, \"1\"]\n");
  CHECK(a.what.find("array of integers") != std::string::npos);
}

TEST_CASE("out of range values and bad enums") {
  auto d = first_error("[spec]\ndraft_len = 0\n");
  CHECK(d.what == "spec.draft_len = 0 is out of range");
  CHECK(d.fix == "use a value from 1 to 64");
  auto e = first_error("[bios]\nsmt = \"of\"\n");
  CHECK(e.fix.find("did you mean \"off\"") != std::string::npos);
  auto f = first_error("[cpufreq]\nverify_freq = 5\n");
  CHECK(f.what.find("kHz") != std::string::npos);
  auto h = first_error("[numa]\nhugepage_headroom = 0.5\n");
  CHECK(h.line == 2);
}

TEST_CASE("include cycles and missing includes") {
  TempDir t;
  write(t.path() / "a.toml", "include = \"b.toml\"\n");
  write(t.path() / "b.toml", "\ninclude = \"a.toml\"\n");
  try {
    load_profile((t.path() / "a.toml").string());
    FAIL("expected a cycle");
  } catch (const ProfileError& e) {
    auto d = e.diagnostics().front();
    CHECK(d.what.find("include cycle") != std::string::npos);
    CHECK(d.file == (t.path() / "b.toml").string());
    CHECK(d.line == 2);
  }
  auto m = first_error("include = \"bsae\"\n");
  CHECK(m.what == "include \"bsae\": no such profile or file");
  CHECK(m.fix == "did you mean \"base\"?");
  CHECK(m.line == 1);
  auto self = first_error("include = \"user.toml\"\n", (t.path() / "user.toml").string());
  CHECK(self.what.find("no such profile or file") != std::string::npos);  // not on disk
  write(t.path() / "self.toml", "include = \"self.toml\"\n");
  CHECK_THROWS_WITH_AS(load_profile((t.path() / "self.toml").string()),
                       doctest::Contains("include cycle"), ProfileError);
}

TEST_CASE("bad CPU list and bad cbm mask strings") {
  auto c = first_error("[partition]\nhousekeeping_cpus = \"0-3,x\"\n");
  CHECK(c.line == 2);
  CHECK(c.what.find("'x' is not a CPU number") != std::string::npos);
  auto m = first_error("[cat]\ndraft_cbm = \"fgh\"\n");
  CHECK(m.what.find("is not a cache way mask") != std::string::npos);
  auto z = first_error("[cat]\nverify_cbm = \"0\"\n");
  CHECK(z.line == 2);
}

TEST_CASE("all errors of a file are reported together") {
  try {
    load_profile_text("[spec]\ndraft_len = 0\n[bios]\nsmt = 3\n", "x.toml");
    FAIL("expected errors");
  } catch (const ProfileError& e) {
    CHECK(e.diagnostics().size() == 2);
    CHECK(std::string(e.what()).find("x.toml:2:") != std::string::npos);
    CHECK(std::string(e.what()).find("x.toml:4:") != std::string::npos);
  }
}

TEST_CASE("edit distance") {
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(closest("famly", {"family", "models"}) == "family");
  CHECK(closest("xyz", {"family"}) == "");
}
