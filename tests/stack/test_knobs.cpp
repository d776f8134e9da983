// Knob kinds on small hand-made trees: read, canonical compare, write, restore.
#include <doctest/doctest.h>

#include <fstream>

#include "../fixture/fixture_cache.hpp"
#include "stack/host_writes.hpp"
#include "stack/knob.hpp"
#include "stack/text_util.hpp"
#include "stack_test_util.hpp"

using namespace epyctune;
using namespace epyctune::stack;
namespace fs = std::filesystem;

namespace {

using testing::put;

std::string get(const fs::path& root, const std::string& rel) {
  std::ifstream in(root / rel);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

KnobLocation mk(KnobKind kind, const std::string& path) {
  KnobLocation l;
  l.kind = kind;
  l.path = path;
  return l;
}

KnobLocation value_loc(const std::string& path, Canon c) {
  KnobLocation l;
  l.kind = KnobKind::Value;
  l.path = path;
  l.canon = c;
  return l;
}

}  // namespace

TEST_CASE("text helpers: numbers, sections, schemata, cmdline") {
  CHECK(parse_u64("0x2f") == 0x2f);
  CHECK(parse_u64(" 47\n") == 47);
  CHECK_THROWS_AS(parse_u64("zz"), std::invalid_argument);
  std::string toml = "[a]\nx = 1\n\n[b]\ny = [1, 2]\n";
  CHECK(toml_section(toml, "b").value() == "[b]\ny = [1, 2]\n");
  CHECK(toml_section(toml, "a").value() == "[a]\nx = 1\n\n");
  CHECK(!toml_section(toml, "c"));
  CHECK(replace_toml_section(toml, "a", "[a]\nx = 2\n") == "[a]\nx = 2\n[b]\ny = [1, 2]\n");
  CHECK(replace_toml_section("", "c", "[c]\n") == "[c]\n");
  std::string sch = "    L3:0=ffff;1=ffff\n    MB:0=2048;1=2048\n";
  CHECK(schemata_domain(sch, 1).value() == "ffff");
  CHECK(!schemata_domain(sch, 2));
  std::string merged = merge_schemata_domain(sch, 1, "ff");
  CHECK(merged == "    L3:0=ffff;1=ff\n    MB:0=2048;1=2048\n");
  CHECK(merge_schemata_domain(merged, 1, "ffff") == sch);
  CHECK(merge_schemata_domain("", 3, "f") == "L3:3=f\n");
  CHECK(cmdline_param("ro quiet isolcpus=1-3 nohz_full=2 isolcpus=4", "isolcpus").value() == "4");
  CHECK(cmdline_param("ro quiet", "quiet").value() == "");
  CHECK(!cmdline_param("ro quiet", "nohz_full"));
}

TEST_CASE("canonical forms compare what the kernel prints with what it takes") {
  CHECK(canonical(Canon::Choice, "always [madvise] never\n") == "madvise");
  CHECK(canonical(Canon::Choice, "never") == "never");
  CHECK(canonical(Canon::Cpulist, "3,0-2\n") == "0-3");
  CHECK(canonical(Canon::Cpumask, "0000000f\n") == "0-3");
  CHECK(canonical(Canon::Int, " 007\n") == "7");
  CHECK(canonical(Canon::FlagsCpulist, "managed_irq,domain,4,5,6") ==
        canonical(Canon::FlagsCpulist, "domain,managed_irq,4-6"));
}

TEST_CASE("value knob: write the input form, restore the exact bytes on a plain file") {
  testing::ScratchDir d;
  put(d.path(), "sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
  host::Sysroot sys(d.path());
  auto loc = value_loc("/sys/kernel/mm/transparent_hugepage/enabled", Canon::Choice);
  auto orig = read_location(sys, loc);
  CHECK(orig.value == "madvise");
  CHECK(knob_matches(loc, orig, "madvise"));
  CHECK(!knob_matches(loc, orig, "never"));
  write_knob(sys, loc, "never");
  auto now = read_location(sys, loc);
  CHECK(knob_matches(loc, now, "never"));
  restore_knob(sys, loc, orig);
  CHECK(get(d.path(), "sys/kernel/mm/transparent_hugepage/enabled") == "always [madvise] never\n");
  // JSON round trip: revert rebuilds the location from the journal alone.
  auto back = KnobLocation::from_json(loc.to_json());
  CHECK(back.key() == loc.key());
  CHECK(back.canon == Canon::Choice);
}

TEST_CASE("file knob owning one TOML section; revert deletes a file it created") {
  testing::ScratchDir d;
  fs::create_directories(d.path() / "var/lib/epyctune");
  host::Sysroot sys(d.path());
  KnobLocation a = mk(KnobKind::File, "/var/lib/epyctune/engine.toml");
  a.section = "weights";
  KnobLocation b = a;
  b.section = "spec";
  auto orig_a = read_location(sys, a);
  CHECK(!orig_a.present);
  write_knob(sys, a, "[weights]\nlayout = \"split\"\n");
  auto orig_b = read_location(sys, b);
  write_knob(sys, b, "[spec]\ndraft_len = 8\n");
  CHECK(get(d.path(), "var/lib/epyctune/engine.toml") ==
        "[weights]\nlayout = \"split\"\n[spec]\ndraft_len = 8\n");
  CHECK(knob_matches(a, read_location(sys, a), "[weights]\nlayout = \"split\"\n"));
  restore_knob(sys, b, orig_b);
  restore_knob(sys, a, orig_a);
  CHECK(!fs::exists(d.path() / "var/lib/epyctune/engine.toml"));
}

TEST_CASE("dir + schemata knobs: a created group is removed with its schemata") {
  testing::ScratchDir d;
  put(d.path(), "sys/fs/resctrl/schemata", "L3:0=ffff;1=ffff\nMB:0=2048;1=2048\n");
  host::Sysroot sys(d.path());
  KnobLocation dir = mk(KnobKind::Dir, "/sys/fs/resctrl/g");
  KnobLocation root_s = mk(KnobKind::Schemata, "/sys/fs/resctrl/schemata");
  root_s.domain = 1;
  KnobLocation g_s = mk(KnobKind::Schemata, "/sys/fs/resctrl/g/schemata");
  g_s.domain = 0;
  auto o_dir = read_location(sys, dir);
  auto o_root = read_location(sys, root_s);
  CHECK(o_root.value == "ffff");
  write_knob(sys, dir, "present");
  auto o_g = read_location(sys, g_s);
  CHECK(!o_g.present);
  write_knob(sys, g_s, "f0");
  write_knob(sys, root_s, "0f");
  CHECK(knob_matches(g_s, read_location(sys, g_s), "f0"));
  CHECK(get(d.path(), "sys/fs/resctrl/schemata") == "L3:0=ffff;1=0f\nMB:0=2048;1=2048\n");
  restore_knob(sys, root_s, o_root);
  restore_knob(sys, g_s, o_g);
  restore_knob(sys, dir, o_dir);
  CHECK(!fs::exists(d.path() / "sys/fs/resctrl/g"));
  CHECK(get(d.path(), "sys/fs/resctrl/schemata") == "L3:0=ffff;1=ffff\nMB:0=2048;1=2048\n");
}

TEST_CASE("msr knob: read-modify-write touches only the masked bits") {
  testing::ScratchDir d;
  fs::create_directories(d.path() / "dev/cpu/0");
  { std::ofstream(d.path() / "dev/cpu/0/msr"); }
  host::Sysroot sys(d.path());
  fs::resize_file(d.path() / "dev/cpu/0/msr", 0xC0000110);
  sys.write_msr(0, 0xC0000108, 0x3C0);  // Zen 5 reset value: bits above the mask
  KnobLocation loc = mk(KnobKind::Msr, "/dev/cpu/0/msr");
  loc.cpu = 0;
  loc.msr = 0xC0000108;
  loc.mask = 0x2F;
  auto orig = read_location(sys, loc);
  CHECK(orig.value == "0x0");
  write_knob(sys, loc, "0x2f");
  CHECK(sys.read_msr(0, 0xC0000108) == 0x3EF);
  restore_knob(sys, loc, orig);
  CHECK(sys.read_msr(0, 0xC0000108) == 0x3C0);
  CHECK(KnobLocation::from_json(loc.to_json()).key() == loc.key());
}

TEST_CASE("counted writes: hooks see every write, a before-hook can refuse one") {
  testing::ScratchDir d;
  put(d.path(), "proc/sys/kernel/numa_balancing", "1\n");
  host::Sysroot sys(d.path());
  auto loc = value_loc("/proc/sys/kernel/numa_balancing", Canon::Int);
  auto n0 = write_count();
  write_knob(sys, loc, "0");
  CHECK(write_count() == n0 + 1);
  set_write_hooks({[](const std::string& p) { throw host::HostError("write", p, EIO); }, {}});
  CHECK_THROWS_AS(write_knob(sys, loc, "1"), host::HostError);
  clear_write_hooks();
  CHECK(get(d.path(), "proc/sys/kernel/numa_balancing") == "0\n");
  CHECK(!is_kernel_fs(sys, "/proc/sys/kernel/numa_balancing"));
  CHECK(is_kernel_fs(host::Sysroot("/"), "/proc/sys/kernel/numa_balancing"));
}
