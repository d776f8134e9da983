// The journal is the only copy of the originals: damage to it must never be
// mistaken for "nothing left to restore", and its bytes must come back exact.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>

#include "../fixture/fixture_cache.hpp"
#include "stack/apply.hpp"
#include "stack/journal.hpp"
#include "stack/revert.hpp"
#include "stack/steps.hpp"
#include "stack_harness.hpp"
#include "test_util.hpp"

using namespace epyctune;
using namespace epyctune::stack;
namespace fs = std::filesystem;
using epyctune::testing::read_file;
using epyctune::testing::write_file;

namespace {

std::string high_bytes() {
  std::string s = "# not UTF-8:";
  for (int c = 0x80; c <= 0xff; ++c) s += static_cast<char>(c);
  return s + "\n";
}

Knob file_knob(const std::string& path, const std::string& text) {
  Knob k;
  k.step = "isolation";
  k.name = "drop-in";
  k.loc.kind = KnobKind::File;
  k.loc.path = path;
  k.desired = text;
  return k;
}

}  // namespace

TEST_CASE("journal cut at every byte offset: revert never claims success, never deletes it") {
  testing::StackHost h("9754");
  // The numa step's knobs plus two more, so that records follow records.
  auto knobs = h.knobs("numa");
  for (const char* name : {"sched_autogroup_enabled", "sched_child_runs_first"}) {
    write_file(h.dir.path() / "proc/sys/kernel" / name, "1\n");
    knobs.push_back(
        value_knob("numa", name, std::string("/proc/sys/kernel/") + name, Canon::Int, "0"));
  }
  auto r = apply_knobs(h.sys, knobs, {});
  REQUIRE(r.exit_code == kExitOk);
  fs::path jp = h.dir.path() / "var/lib/epyctune/journal";
  const std::string full = read_file(jp);
  auto c = Journal(h.sys).load();
  REQUIRE(c.format == 2);
  REQUIRE(c.damage.empty());
  REQUIRE(c.entries.size() >= 3);
  struct Path {
    fs::path file;
    std::string applied, original;
    size_t record_end;  // byte offset just past its record
  };
  std::vector<size_t> line_ends;
  for (size_t i = 0; i < full.size(); ++i)
    if (full[i] == '\n') line_ends.push_back(i + 1);
  std::vector<Path> paths;
  for (size_t i = 0; i < c.entries.size(); ++i) {
    const auto& e = c.entries[i];
    REQUIRE(e.loc.kind == KnobKind::Value);
    auto file = h.dir.path() / e.loc.path.substr(1);
    // Line 1 is the seal, line 2 the header: entry i is line i + 3.
    paths.push_back({file, read_file(file), e.original.raw, line_ends.at(i + 2)});
    REQUIRE(paths.back().applied != paths.back().original);
  }
  for (size_t off = 0; off < full.size(); ++off) {
    CAPTURE(off);
    for (const auto& p : paths) write_file(p.file, p.applied);
    write_file(jp, full.substr(0, off));
    auto rv = revert_journal(h.sys);
    REQUIRE(rv.exit_code == kExitFailed);
    REQUIRE(rv.error.find("damaged") != std::string::npos);
    REQUIRE(fs::exists(jp));
    // Every record that survived the cut was replayed.
    for (const auto& p : paths)
      if (off >= p.record_end) REQUIRE(read_file(p.file) == p.original);
  }
  for (const auto& p : paths) write_file(p.file, p.applied);
  write_file(jp, full);
  auto rv = revert_journal(h.sys);
  CHECK(rv.exit_code == kExitOk);
  CHECK(!fs::exists(jp));
  for (const auto& p : paths) CHECK(read_file(p.file) == p.original);
}

TEST_CASE("journal: a bad checksum in the middle is named; the other records are replayed") {
  testing::ScratchDir d;
  write_file(d.path() / "proc/sys/kernel/numa_balancing", "1\n");
  write_file(d.path() / "proc/sys/kernel/sched_autogroup_enabled", "1\n");
  host::Sysroot sys(d.path());
  auto r = apply_knobs(
      sys,
      {value_knob("numa", "nb", "/proc/sys/kernel/numa_balancing", Canon::Int, "0"),
       value_knob("numa", "ag", "/proc/sys/kernel/sched_autogroup_enabled", Canon::Int, "0")},
      {});
  REQUIRE(r.exit_code == kExitOk);
  fs::path jp = d.path() / "var/lib/epyctune/journal";
  std::string text = read_file(jp);
  auto at = text.find("numa_balancing");
  REQUIRE(at != std::string::npos);
  text[at] = 'N';  // one flipped byte inside line 3
  write_file(jp, text);
  auto rv = revert_journal(sys);
  CHECK(rv.exit_code == kExitFailed);
  CHECK(rv.error.find("line 3") != std::string::npos);
  CHECK(read_file(d.path() / "proc/sys/kernel/sched_autogroup_enabled") == "1\n");
  CHECK(read_file(d.path() / "proc/sys/kernel/numa_balancing") == "0\n");
  CHECK(fs::exists(jp));
}

TEST_CASE("journal: not a regular file is refused at once, never followed or blocked on") {
  testing::ScratchDir d;
  write_file(d.path() / "proc/sys/kernel/numa_balancing", "1\n");
  host::Sysroot sys(d.path());
  ensure_state_dir(sys);
  fs::path jp = d.path() / "var/lib/epyctune/journal";
  std::string expect;
  SUBCASE("a symlink loop") {
    fs::create_symlink("journal", jp);
    expect = "symbolic link";
  }
  SUBCASE("a dangling symlink") {
    fs::create_symlink("/nonexistent", jp);
    expect = "symbolic link";
  }
  SUBCASE("a FIFO") {
    REQUIRE(::mkfifo(jp.c_str(), 0600) == 0);
    expect = "is a FIFO";
  }
  SUBCASE("a directory") {
    fs::create_directory(jp);
    expect = "is a directory";
  }
  CHECK_THROWS_WITH_AS(revert_journal(sys), doctest::Contains(expect.c_str()), JournalError);
  std::vector<Knob> knobs{
      value_knob("numa", "nb", "/proc/sys/kernel/numa_balancing", Canon::Int, "0")};
  CHECK_THROWS_WITH_AS(apply_knobs(sys, knobs, {}), doctest::Contains(expect.c_str()),
                       JournalError);
  CHECK(read_file(d.path() / "proc/sys/kernel/numa_balancing") == "1\n");
  CHECK(fs::symlink_status(jp).type() != fs::file_type::not_found);
}

TEST_CASE("journal: bytes that are not UTF-8 come back byte for byte") {
  testing::ScratchDir d;
  const std::string binary = high_bytes();
  write_file(d.path() / "etc/default/grub.d/epyctune.cfg", binary);
  write_file(d.path() / "proc/sys/kernel/odd", "\xff\xfe\n");
  host::Sysroot sys(d.path());
  auto r = apply_knobs(
      sys,
      {file_knob("/etc/default/grub.d/epyctune.cfg", "GRUB_CMDLINE_LINUX_DEFAULT=\"x\"\n"),
       value_knob("numa", "odd", "/proc/sys/kernel/odd", Canon::Plain, "0")},
      {});
  REQUIRE(r.exit_code == kExitOk);
  CHECK(read_file(d.path() / "var/lib/epyctune/journal").find("base64") != std::string::npos);
  auto c = Journal(sys).load();
  REQUIRE(c.entries.size() == 2);
  CHECK(c.entries[0].original.raw == binary);
  auto rv = revert_journal(sys);
  CHECK(rv.exit_code == kExitOk);
  CHECK(read_file(d.path() / "etc/default/grub.d/epyctune.cfg") == binary);
  CHECK(read_file(d.path() / "proc/sys/kernel/odd") == "\xff\xfe\n");
}

TEST_CASE("journal: mode 0600, writer version, torn append past the seal") {
  testing::ScratchDir d;
  write_file(d.path() / "proc/sys/kernel/numa_balancing", "1\n");
  write_file(d.path() / "proc/sys/kernel/sched_autogroup_enabled", "1\n");
  host::Sysroot sys(d.path());
  auto nb = value_knob("numa", "nb", "/proc/sys/kernel/numa_balancing", Canon::Int, "0");
  REQUIRE(apply_knobs(sys, {nb}, {}).exit_code == kExitOk);
  fs::path jp = d.path() / "var/lib/epyctune/journal";
  struct stat st {};
  REQUIRE(::stat(jp.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  auto c = Journal(sys).load();
  CHECK(c.writer == journal_writer_version());
  CHECK(!c.writer.empty());
  // A process killed inside an append leaves a partial record past the seal:
  // its knob was never written, so it is not damage.
  std::ofstream(jp, std::ios::app) << "312 0badc0de {\"type\":\"orig";
  c = Journal(sys).load();
  CHECK(c.damage.empty());
  CHECK(!c.torn_tail.empty());
  SUBCASE("revert ignores it and says so") {
    auto rv = revert_journal(sys);
    CHECK(rv.exit_code == kExitOk);
    CHECK(!rv.notes.empty());
    CHECK(read_file(d.path() / "proc/sys/kernel/numa_balancing") == "1\n");
  }
  SUBCASE("the next apply cuts it off and appends after the intact part") {
    auto ag = value_knob("numa", "ag", "/proc/sys/kernel/sched_autogroup_enabled", Canon::Int, "0");
    REQUIRE(apply_knobs(sys, {nb, ag}, {}).exit_code == kExitOk);
    c = Journal(sys).load();
    CHECK(c.damage.empty());
    CHECK(c.torn_tail.empty());
    CHECK(c.entries.size() == 2);
    CHECK(revert_journal(sys).exit_code == kExitOk);
    CHECK(read_file(d.path() / "proc/sys/kernel/sched_autogroup_enabled") == "1\n");
  }
}

TEST_CASE("journal: a format-1 journal (JSON lines) still reverts, and apply upgrades it") {
  testing::ScratchDir d;
  write_file(d.path() / "proc/sys/kernel/numa_balancing", "0\n");
  write_file(d.path() / "proc/sys/kernel/sched_autogroup_enabled", "1\n");
  write_file(d.path() / "var/lib/epyctune/journal",
             "{\"type\":\"header\",\"version\":1,\"created_dirs\":[\"/var/lib/epyctune\"]}\n"
             "{\"type\":\"original\",\"step\":\"numa\",\"name\":\"nb\",\"profile\":\"p\",\"knob\":{"
             "\"kind\":\"value\",\"path\":\"/proc/sys/kernel/numa_balancing\",\"canon\":\"int\"},"
             "\"original\":{\"present\":true,\"value\":\"1\",\"raw\":\"1\\n\",\"input\":\"1\"}}\n");
  host::Sysroot sys(d.path());
  SUBCASE("revert") {
    auto rv = revert_journal(sys);
    CHECK(rv.exit_code == kExitOk);
    CHECK(read_file(d.path() / "proc/sys/kernel/numa_balancing") == "1\n");
    CHECK(!fs::exists(d.path() / "var/lib/epyctune"));
  }
  SUBCASE("apply over it") {
    auto ag = value_knob("numa", "ag", "/proc/sys/kernel/sched_autogroup_enabled", Canon::Int, "0");
    REQUIRE(apply_knobs(sys, {ag}, {}).exit_code == kExitOk);
    CHECK(read_file(d.path() / "var/lib/epyctune/journal").starts_with("EPYCTUNE-JOURNAL 2 "));
    auto c = Journal(sys).load();
    CHECK(c.format == 2);
    CHECK(c.entries.size() == 2);
    CHECK(c.created_dirs == std::vector<std::string>{"/var/lib/epyctune"});
    CHECK(revert_journal(sys).exit_code == kExitOk);
    CHECK(read_file(d.path() / "proc/sys/kernel/numa_balancing") == "1\n");
    CHECK(read_file(d.path() / "proc/sys/kernel/sched_autogroup_enabled") == "1\n");
  }
  SUBCASE("a format-1 journal cut inside its last line is damage") {
    auto text = read_file(d.path() / "var/lib/epyctune/journal");
    write_file(d.path() / "var/lib/epyctune/journal", text.substr(0, text.size() - 20));
    auto rv = revert_journal(sys);
    CHECK(rv.exit_code == kExitFailed);
    CHECK(fs::exists(d.path() / "var/lib/epyctune/journal"));
  }
}
