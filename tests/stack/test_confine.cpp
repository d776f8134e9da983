// A root tool's writes stay where they belong: a symlink or ".." cannot lead a
// write out of the sysroot, revert refuses journal records that name a place
// the stack never writes, profile paths are confined, and a knob whose
// current value cannot be read fails the run instead of being skipped.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <fstream>

#include "../fixture/fixture_cache.hpp"
#include "stack/apply.hpp"
#include "stack/confine.hpp"
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

// A sysroot beside a directory outside it that nothing may touch.
struct Jail {
  testing::ScratchDir base;
  fs::path root = base.path() / "root";
  fs::path outside = base.path() / "outside";
  host::Sysroot sys{"/nonexistent"};
  Jail() {
    write_file(outside / "secret", "outside\n");
    write_file(root / "proc/sys/kernel/numa_balancing", "1\n");
    fs::create_directories(root / "var/lib/epyctune");
    sys = host::Sysroot(root);
  }
  // A v1 journal (the format main wrote) holding `records`, one JSON per line.
  void journal(const std::vector<std::string>& records) {
    std::string text = "{\"type\":\"header\",\"version\":1,\"created_dirs\":[]}\n";
    for (const auto& r : records) text += r + "\n";
    write_file(root / "var/lib/epyctune/journal", text);
  }
};

std::string file_record(const std::string& path, bool present, const std::string& raw) {
  return fmt::format(
      "{{\"type\":\"original\",\"step\":\"x\",\"name\":\"y\",\"profile\":\"\","
      "\"knob\":{{\"kind\":\"file\",\"path\":\"{}\",\"section\":\"\"}},"
      "\"original\":{{\"present\":{},\"value\":\"{}\",\"raw\":\"{}\",\"input\":\"\"}}}}",
      path, present ? "true" : "false", raw, raw);
}

}  // namespace

TEST_CASE("revert refuses journal records outside the stack's places, before writing") {
  Jail j;
  // A '..' escaping the tree, an allowed-looking root climbing out, a file
  // the stack never writes (its "original" says absent: revert would delete it).
  std::string escape = "/var/lib/epyctune/../../../../outside/secret";
  write_file(j.root / "etc/shadow", "root:x\n");
  std::string line = "line 2";
  SUBCASE("'..' in a path") {
    j.journal({file_record(escape, true, "pwned\\n")});
  }
  SUBCASE("a file outside the allow-list") {
    j.journal({file_record("/etc/shadow", false, "")});
  }
  SUBCASE("a directory outside the allow-list") {
    fs::create_directories(j.root / "usr/lib");
    j.journal(
        {"{\"type\":\"original\",\"step\":\"x\",\"name\":\"y\",\"knob\":{\"kind\":\"dir\","
         "\"path\":\"/usr\"},\"original\":{\"present\":false,\"value\":\"absent\","
         "\"raw\":\"\",\"input\":\"\"}}"});
  }
  SUBCASE("a good record next to a bad one: neither is replayed") {
    line = "line 3";
    j.journal(
        {"{\"type\":\"original\",\"step\":\"numa\",\"name\":\"nb\",\"knob\":{\"kind\":"
         "\"value\",\"path\":\"/proc/sys/kernel/numa_balancing\",\"canon\":\"int\"},"
         "\"original\":{\"present\":true,\"value\":\"0\",\"raw\":\"0\\n\",\"input\":\"0\"}}",
         file_record("/etc/shadow", false, "")});
  }
  auto r = revert_journal(j.sys);
  CHECK(r.exit_code == kExitError);
  CHECK(r.error.find("not reverting anything") != std::string::npos);
  CHECK(r.error.find(line) != std::string::npos);
  CHECK(read_file(j.outside / "secret") == "outside\n");
  CHECK(read_file(j.root / "etc/shadow") == "root:x\n");
  CHECK(fs::is_directory(j.root / "etc"));
  if (fs::exists(j.root / "usr")) CHECK(fs::is_directory(j.root / "usr/lib"));
  CHECK(read_file(j.root / "proc/sys/kernel/numa_balancing") == "1\n");
  CHECK(fs::exists(j.root / "var/lib/epyctune/journal"));
}

TEST_CASE("revert through a symlinked knob directory pointing out fails that knob, keeps journal") {
  Jail j;
  fs::remove_all(j.root / "proc/sys");
  write_file(j.outside / "kernel/numa_balancing", "1\n");
  fs::create_directory_symlink(j.outside, j.root / "proc/sys");
  j.journal(
      {"{\"type\":\"original\",\"step\":\"numa\",\"name\":\"nb\",\"knob\":{\"kind\":"
       "\"value\",\"path\":\"/proc/sys/kernel/numa_balancing\",\"canon\":\"int\"},"
       "\"original\":{\"present\":true,\"value\":\"0\",\"raw\":\"0\\n\",\"input\":\"0\"}}"});
  auto r = revert_journal(j.sys);
  CHECK(r.exit_code == kExitFailed);
  REQUIRE(r.knobs.size() == 1);
  CHECK(r.knobs[0].status == stack::KnobStatus::Failed);
  CHECK(read_file(j.outside / "kernel/numa_balancing") == "1\n");
  CHECK(fs::exists(j.root / "var/lib/epyctune/journal"));
}

TEST_CASE("allow-list: each knob kind writes only its own places") {
  auto problem = [](KnobKind kind, const std::string& path, int cpu = -1) {
    KnobLocation l;
    l.kind = kind;
    l.path = path;
    l.cpu = cpu;
    return location_problem(l);
  };
  CHECK(problem(KnobKind::Value, "/sys/kernel/mm/transparent_hugepage/enabled") == "");
  CHECK(problem(KnobKind::Value, "/proc/irq/24/smp_affinity_list") == "");
  CHECK(problem(KnobKind::Value, "/proc/sys/kernel/numa_balancing") == "");
  CHECK(problem(KnobKind::Value, "/etc/passwd") != "");
  CHECK(problem(KnobKind::Value, "/sys/../etc/passwd").find("'..'") != std::string::npos);
  CHECK(problem(KnobKind::Value, "/sys/./x") != "");
  CHECK(problem(KnobKind::Value, "/sys//x") != "");
  CHECK(problem(KnobKind::File, "/etc/default/grub.d/epyctune.cfg") == "");
  CHECK(problem(KnobKind::File, "/var/lib/epyctune/engine.toml") == "");
  CHECK(problem(KnobKind::File, "/var/lib/epyctune/journal") != "");
  CHECK(problem(KnobKind::File, "/var/lib/epyctune/lock") != "");
  CHECK(problem(KnobKind::File, "/etc/default/grub") != "");
  CHECK(problem(KnobKind::Dir, "/sys/fs/resctrl/epyctune-draft") == "");
  CHECK(problem(KnobKind::Dir, "/sys/fs/resctrl/a/b") != "");
  CHECK(problem(KnobKind::Dir, "/etc/default") == "");
  CHECK(problem(KnobKind::Dir, "/etc/systemd") != "");
  CHECK(problem(KnobKind::Msr, "/dev/cpu/3/msr", 3) == "");
  CHECK(problem(KnobKind::Msr, "/dev/cpu/3/msr", 4) != "");
  CHECK(problem(KnobKind::Msr, "/dev/mem", 0) != "");
  CHECK(problem(KnobKind::Schemata, "/sys/fs/resctrl/g/schemata") == "");
  CHECK(problem(KnobKind::Schemata, "/sys/fs/resctrl/schemata") == "");
  CHECK(problem(KnobKind::Schemata, "/sys/fs/resctrl/g/tasks") != "");
}

TEST_CASE("profile paths: resctrl groups, drop-in and launch config are confined") {
  testing::StackHost h("9754");
  auto build = [&](const char* steps) {
    StepContext ctx{h.sys, h.profile, h.topo, h.part, ""};
    return build_knobs(ctx, parse_steps(steps));
  };
  SUBCASE("group name with '..'") {
    h.profile.cat.draft_group = "../../../../outside";
    CHECK_THROWS_WITH_AS(build("cat"), doctest::Contains("[cat] draft_group"),
                         std::invalid_argument);
  }
  SUBCASE("group name with '/'") {
    h.profile.cat.verify_group = "a/b";
    CHECK_THROWS_WITH_AS(build("cat"), doctest::Contains("holds a '/'"), std::invalid_argument);
  }
  SUBCASE("drop-in outside grub.d") {
    h.profile.isolation.bootloader_dropin = "/etc/passwd";
    CHECK_THROWS_WITH_AS(build("isolation"), doctest::Contains("bootloader_dropin"),
                         std::invalid_argument);
  }
  SUBCASE("drop-in climbing out of grub.d") {
    h.profile.isolation.bootloader_dropin = "/etc/default/grub.d/../../shadow";
    CHECK_THROWS_AS(build("isolation"), std::invalid_argument);
  }
  SUBCASE("launch config outside the state dir") {
    h.profile.weights.launch_config = "/etc/cron.d/x";
    CHECK_THROWS_WITH_AS(build("weights"), doctest::Contains("[weights] launch_config"),
                         std::invalid_argument);
    h.profile.weights.launch_config = "/var/lib/epyctune/journal";
    CHECK_THROWS_AS(build("weights"), std::invalid_argument);
  }
  SUBCASE("the defaults build") {
    CHECK(!build("").empty());
  }
}

TEST_CASE("a knob that cannot be read fails the run, naming knob, path and errno") {
  testing::ScratchDir d;
  write_file(d.path() / "proc/sys/kernel/numa_balancing", "1\n");
  write_file(d.path() / "sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
  host::Sysroot sys(d.path());
  std::vector<Knob> knobs{
      value_knob("numa", "numa_balancing", "/proc/sys/kernel/numa_balancing", Canon::Int, "0"),
      value_knob("numa", "thp", "/sys/kernel/mm/transparent_hugepage/enabled", Canon::Choice,
                 "never")};
  // Root reads a mode-000 file anyway: a directory or a FIFO where the file
  // belongs gives a read error whoever runs the test.
  std::string expect;
  SUBCASE("a directory: EISDIR") {
    fs::remove(d.path() / "sys/kernel/mm/transparent_hugepage/enabled");
    fs::create_directory(d.path() / "sys/kernel/mm/transparent_hugepage/enabled");
    expect = "EISDIR";
  }
  SUBCASE("a FIFO: refused, never blocks") {
    fs::remove(d.path() / "sys/kernel/mm/transparent_hugepage/enabled");
    REQUIRE(::mkfifo((d.path() / "sys/kernel/mm/transparent_hugepage/enabled").c_str(), 0644) == 0);
    expect = "EINVAL";
  }
  for (bool check : {true, false}) {
    CAPTURE(check);
    auto r = apply_knobs(sys, knobs, {.check = check, .keep_going = false, .profile = ""});
    CHECK(r.exit_code == kExitFailed);
    CHECK(r.error.find("numa/thp") != std::string::npos);
    CHECK(r.error.find("transparent_hugepage/enabled") != std::string::npos);
    CHECK(r.error.find(expect) != std::string::npos);
  }
  // Nothing was written, not even the readable knob.
  CHECK(read_file(d.path() / "proc/sys/kernel/numa_balancing") == "1\n");
  CHECK(!fs::exists(d.path() / "var/lib/epyctune/journal"));
}
