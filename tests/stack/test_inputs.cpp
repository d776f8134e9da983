// Hostile and mistaken inputs through the session and the real binary: CAT
// masks the host cannot take, profiles that are not files, CPU lists without
// bounds, strings aimed at the boot loader. Each is refused before anything
// is written, with the file and line to change.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "profile/loader.hpp"
#include "stack/session.hpp"
#include "stack_harness.hpp"

using namespace epyctune;

namespace {

struct Out {
  int code = -1;
  std::string text;  // stdout and stderr together
};

// Runs the real epyctune; arguments are test-made paths and words, never
// anything needing shell quoting beyond single quotes.
Out run_cli(const std::vector<std::string>& args) {
  std::string cmd = EPYCTUNE_BIN;
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  Out o;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) o.text.append(buf, n);
  int status = ::pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

size_t lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

std::string write_profile(const testing::StackHost& h, const std::string& name,
                          const std::string& text) {
  auto p = h.dir.path() / name;
  std::ofstream(p) << text;
  return p.string();
}

void put(const testing::StackHost& h, const std::string& rel, const std::string& text) {
  std::ofstream(h.dir.path() / rel, std::ios::trunc) << text;
}

std::string session_error(const testing::StackHost& h, const std::string& profile,
                          const std::string& steps = "") {
  try {
    stack::open_session({h.dir.path().string(), "", profile, steps, false});
  } catch (const profile::ProfileError& e) {
    return e.what();
  }
  FAIL("the session opened");
  return "";
}

}  // namespace

TEST_CASE("CAT masks outside the host's rules are refused by plan and apply, naming the line") {
  testing::StackHost h("9754");  // info/L3: cbm_mask ffff, min_cbm_bits 1, 16 CLOSIDs
  std::string wide = write_profile(h, "wide.toml",
                                   "include = \"epyc-9754\"\nname = \"wide\"\n[cat]\n"
                                   "draft_cbm = \"1ffff\"\n");
  auto e = session_error(h, wide);
  CHECK(e.find("wide.toml:4:") != std::string::npos);
  CHECK(e.find("outside this host's info/L3/cbm_mask ffff") != std::string::npos);
  // Today's apply skipped the step and exited 0.
  auto apply = run_cli({"--sysroot", h.dir.path().string(), "apply", "--profile", wide});
  CHECK(apply.code == 1);
  CHECK(apply.text.find("wide.toml:4:") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(h.dir.path() / "var/lib/epyctune/journal"));
  auto plan = run_cli({"--sysroot", h.dir.path().string(), "plan", "--profile", wide});
  CHECK(plan.code == 1);
  // Other steps alone still plan.
  CHECK_NOTHROW(stack::open_session({h.dir.path().string(), "", wide, "1,2", false}));

  put(h, "sys/fs/resctrl/info/L3/min_cbm_bits", "4\n");
  std::string narrow = write_profile(h, "narrow.toml",
                                     "include = \"epyc-9754\"\nname = \"narrow\"\n[cat]\n"
                                     "verify_cbm = \"7\"\n");
  CHECK(session_error(h, narrow).find("narrow.toml:4:") != std::string::npos);
  CHECK(session_error(h, narrow).find("min_cbm_bits = 4") != std::string::npos);

  std::string holes = write_profile(h, "holes.toml",
                                    "include = \"epyc-9754\"\nname = \"holes\"\n[cat]\n"
                                    "default_cbm = \"f0f0\"\n");
  CHECK_NOTHROW(stack::open_session({h.dir.path().string(), "", holes, "", false}));
  put(h, "sys/fs/resctrl/info/L3/sparse_masks", "0\n");
  CHECK(session_error(h, holes).find("not contiguous") != std::string::npos);

  put(h, "sys/fs/resctrl/info/L3/num_closids", "2\n");
  auto closids = session_error(h, "9754");
  CHECK(closids.find("2 resctrl CLOSIDs") != std::string::npos);
  CHECK(closids.find("cat.enabled = false") != std::string::npos);
}

TEST_CASE("cli: --profile that is not a regular file is refused by name") {
  testing::StackHost h("9354");
  auto root = h.dir.path().string();
  auto zero = run_cli({"--sysroot", root, "plan", "--profile", "/dev/zero"});
  CHECK(zero.code == 1);
  CHECK(zero.text.find("/dev/zero: it is a character device") != std::string::npos);
  auto dir = run_cli({"--sysroot", root, "plan", "--profile", root + "/"});
  CHECK(dir.code == 1);
  CHECK(dir.text.find("a directory") != std::string::npos);
  auto fifo = h.dir.path() / "p.toml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto f = run_cli({"--sysroot", root, "apply", "--profile", fifo.string()});
  CHECK(f.code == 1);
  CHECK(f.text.find("a FIFO") != std::string::npos);
}

TEST_CASE("cli: CPU ranges without bounds are one short error") {
  testing::StackHost h("9354");
  auto root = h.dir.path().string();
  for (const char* range : {"0-2147483647", "0-99999", "0-8191"}) {
    CAPTURE(range);
    auto p = write_profile(h, "r.toml",
                           fmt::format("include = \"epyc-9354\"\nname = \"r\"\n[partition]\n"
                                       "housekeeping_cpus = \"{}\"\n",
                                       range));
    auto out = run_cli({"--sysroot", root, "plan", "--profile", p});
    CHECK(out.code == 1);
    CHECK(out.text.find("r.toml:4:") != std::string::npos);
    CHECK(lines(out.text) <= 3);
    CHECK(out.text.size() < 1000);
  }
}

TEST_CASE("cli: a profile name aimed at the GRUB drop-in writes nothing") {
  testing::StackHost h("9354");
  auto root = h.dir.path().string();
  auto p = write_profile(h, "evil.toml",
                         "include = \"epyc-9354\"\n"
                         "name = \"x\\nGRUB_CMDLINE_LINUX=\\\"init=/bin/sh\\\"\"\n");
  auto out = run_cli({"--sysroot", root, "apply", "--profile", p});
  CHECK(out.code == 1);
  CHECK(out.text.find("evil.toml:2:") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(h.dir.path() / "etc/default/grub.d/epyctune.cfg"));
  CHECK_FALSE(std::filesystem::exists(h.dir.path() / "var/lib/epyctune/journal"));
}
