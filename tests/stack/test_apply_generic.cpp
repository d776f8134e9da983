// apply / revert over a small hand-made knob list: idempotence, rollback on a
// real write failure, managed-IRQ EIO, partial read-back, crash after every
// k-th write, second profile over the first.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>

#include "../fixture/fixture_cache.hpp"
#include "stack/apply.hpp"
#include "stack/host_writes.hpp"
#include "stack/journal.hpp"
#include "stack/revert.hpp"
#include "stack/steps.hpp"
#include "stack_test_util.hpp"
#include "tree_snapshot.hpp"

using namespace epyctune;
using namespace epyctune::stack;
namespace fs = std::filesystem;

namespace {

using testing::put;

struct SmallHost {
  testing::ScratchDir dir;
  host::Sysroot sys{dir.path()};
  SmallHost() {
    put(dir.path(), "proc/sys/kernel/numa_balancing", "1\n");
    put(dir.path(), "sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
    put(dir.path(), "proc/irq/24/smp_affinity_list", "0-7\n");
    put(dir.path(), "proc/irq/25/smp_affinity_list", "0-7\n");
    put(dir.path(), "sys/fs/resctrl/schemata", "L3:0=ffff;1=ffff\n");
    fs::create_directories(dir.path() / "etc/default");
    sys = host::Sysroot(dir.path());
  }
  std::vector<Knob> knobs(const std::string& thp = "never", const std::string& irq = "0") const {
    std::vector<Knob> k;
    k.push_back(
        value_knob("numa", "numa_balancing", "/proc/sys/kernel/numa_balancing", Canon::Int, "0"));
    k.push_back(value_knob("numa", "thp", "/sys/kernel/mm/transparent_hugepage/enabled",
                           Canon::Choice, thp));
    for (const char* n : {"24", "25"}) {
      auto v =
          value_knob("isolation", std::string("IRQ ") + n,
                     std::string("/proc/irq/") + n + "/smp_affinity_list", Canon::Cpulist, irq);
      v.eio_means = "unchangeable: managed IRQ";
      k.push_back(v);
    }
    auto dirs = parent_dir_knobs(sys, "isolation", "/etc/default/grub.d/epyctune.cfg");
    k.insert(k.end(), dirs.begin(), dirs.end());
    Knob f;
    f.step = "isolation";
    f.name = "drop-in";
    f.loc.kind = KnobKind::File;
    f.loc.path = "/etc/default/grub.d/epyctune.cfg";
    f.desired = "GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT nohz_full=1-7\"\n";
    f.reboot_required = true;
    k.push_back(f);
    Knob g;
    g.step = "cat";
    g.name = "group";
    g.loc.kind = KnobKind::Dir;
    g.loc.path = "/sys/fs/resctrl/draft";
    g.desired = "present";
    k.push_back(g);
    Knob s;
    s.step = "cat";
    s.name = "draft domain 1";
    s.loc.kind = KnobKind::Schemata;
    s.loc.path = "/sys/fs/resctrl/draft/schemata";
    s.loc.domain = 1;
    s.desired = "ff";
    k.push_back(s);
    return k;
  }
};

const KnobOutcome& find(const ApplyResult& r, const std::string& name) {
  for (const auto& o : r.knobs)
    if (o.name == name) return o;
  throw std::runtime_error("no knob " + name);
}

}  // namespace

TEST_CASE("apply, idempotent re-apply, check mode, revert byte-identical") {
  SmallHost h;
  auto before = testing::snapshot_tree(h.dir.path());
  auto check = apply_knobs(h.sys, h.knobs(), {.check = true, .keep_going = false, .profile = ""});
  CHECK(check.changed);
  CHECK(find(check, "thp").status == stack::KnobStatus::WouldApply);
  CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path())) == "");

  auto r = apply_knobs(h.sys, h.knobs(), {});
  CHECK(r.exit_code == kExitOk);
  CHECK(r.changed);
  CHECK(r.reboot_required);
  CHECK(find(r, "thp").status == stack::KnobStatus::Applied);
  CHECK(find(r, "thp").before == "madvise");
  CHECK(find(r, "thp").after == "never");
  auto again = apply_knobs(h.sys, h.knobs(), {});
  CHECK(!again.changed);
  for (const auto& o : again.knobs) CHECK(o.status == stack::KnobStatus::Unchanged);
  auto j = to_json(again);
  CHECK(j["changed"] == false);
  CHECK(j["steps"][0]["step"] == "numa");

  auto rv = revert_journal(h.sys);
  CHECK(rv.exit_code == kExitOk);
  CHECK(rv.changed);
  CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path())) == "");
}

TEST_CASE("a real write failure rolls back this run and names knob, path and errno") {
  SmallHost h;
  auto before = testing::snapshot_tree(h.dir.path());
  // Root ignores file modes, so make the failure real: a directory where the
  // IRQ attribute should be gives EISDIR on open for write.
  fs::remove(h.dir.path() / "proc/irq/25/smp_affinity_list");
  fs::create_directory(h.dir.path() / "proc/irq/25/smp_affinity_list");
  auto sabotaged = testing::snapshot_tree(h.dir.path());
  auto knobs = h.knobs();
  // The planner cannot read a directory as a value, so it would skip the knob:
  // plan against a readable file, then break it between plan and write.
  fs::remove(h.dir.path() / "proc/irq/25/smp_affinity_list");
  put(h.dir.path(), "proc/irq/25/smp_affinity_list", "0-7\n");
  set_write_hooks({[&](const std::string& p) {
                     if (p.find("irq/25") != std::string::npos) {
                       fs::remove(p);
                       fs::create_directory(p);
                     }
                   },
                   {}});
  auto r = apply_knobs(h.sys, knobs, {});
  clear_write_hooks();
  CHECK(r.exit_code == kExitFailed);
  CHECK(r.rolled_back);
  CHECK(!r.changed);
  CHECK(r.error.find("isolation/IRQ 25") != std::string::npos);
  CHECK(r.error.find("proc/irq/25/smp_affinity_list") != std::string::npos);
  CHECK(r.error.find("EISDIR") != std::string::npos);
  CHECK(find(r, "numa_balancing").status == stack::KnobStatus::RolledBack);
  CHECK(find(r, "drop-in").status == stack::KnobStatus::Skipped);
  // Host state is back as before the run (only epyctune's own state dir differs).
  auto after = testing::snapshot_tree(h.dir.path());
  for (auto it = after.entries.begin(); it != after.entries.end();)
    it = it->first.rfind("var", 0) == 0 ? after.entries.erase(it) : std::next(it);
  CHECK(testing::diff_trees(sabotaged, after) == "");
  // Revert cannot read back a value that is now a directory: it says so and
  // keeps the journal; once the file is back, revert completes.
  auto stuck = revert_journal(h.sys);
  CHECK(stuck.exit_code == kExitFailed);
  CHECK(fs::exists(h.dir.path() / "var/lib/epyctune/journal"));
  fs::remove(h.dir.path() / "proc/irq/25/smp_affinity_list");
  put(h.dir.path(), "proc/irq/25/smp_affinity_list", "0-7\n");
  CHECK(revert_journal(h.sys).exit_code == kExitOk);
  CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path())) == "");

  SUBCASE("--keep-going carries on and still reports the failure") {
    fs::remove(h.dir.path() / "proc/irq/25/smp_affinity_list");
    put(h.dir.path(), "proc/irq/25/smp_affinity_list", "0-7\n");
    set_write_hooks({[&](const std::string& p) {
                       if (p.find("irq/25") != std::string::npos)
                         throw host::HostError("write", p, EINVAL);
                     },
                     {}});
    auto k = apply_knobs(h.sys, knobs, {.check = false, .keep_going = true, .profile = ""});
    clear_write_hooks();
    CHECK(k.exit_code == kExitFailed);
    CHECK(!k.rolled_back);
    CHECK(find(k, "IRQ 25").status == stack::KnobStatus::Failed);
    CHECK(find(k, "drop-in").status == stack::KnobStatus::Applied);
    CHECK(revert_journal(h.sys).exit_code == kExitOk);
  }
}

TEST_CASE("EIO on a managed IRQ is 'unchangeable', not a failure; a short read-back is reported") {
  SmallHost h;
  set_write_hooks({[](const std::string& p) {
                     if (p.find("irq/24") != std::string::npos)
                       throw host::HostError("write", p, EIO);
                   },
                   [](const std::string& p) {
                     // The kernel could reserve/accept only part of what was asked.
                     if (p.find("numa_balancing") != std::string::npos) std::ofstream(p) << "1\n";
                   }});
  auto r = apply_knobs(h.sys, h.knobs(), {});
  clear_write_hooks();
  CHECK(find(r, "IRQ 24").status == stack::KnobStatus::Skipped);
  CHECK(find(r, "IRQ 24").reason == "unchangeable: managed IRQ");
  CHECK(find(r, "numa_balancing").status == stack::KnobStatus::Mismatch);
  CHECK(find(r, "numa_balancing").reason.find("read back 1") != std::string::npos);
  CHECK(r.exit_code == kExitFailed);
  CHECK(!r.rolled_back);
  CHECK(revert_journal(h.sys).exit_code == kExitOk);
}

TEST_CASE("a second profile over the first keeps the first originals") {
  SmallHost h;
  auto before = testing::snapshot_tree(h.dir.path());
  REQUIRE(apply_knobs(h.sys, h.knobs("never", "0"),
                      {.check = false, .keep_going = false, .profile = "a"})
              .exit_code == kExitOk);
  auto r2 = apply_knobs(h.sys, h.knobs("always", "0-1"),
                        {.check = false, .keep_going = false, .profile = "b"});
  REQUIRE(r2.exit_code == kExitOk);
  CHECK(find(r2, "thp").before == "never");
  auto entries = Journal(h.sys).load().entries;
  for (const auto& e : entries) CHECK(e.profile == "a");
  REQUIRE(revert_journal(h.sys).exit_code == kExitOk);
  CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path())) == "");
}

TEST_CASE("crash after every k-th write, then revert: byte-identical") {
  SmallHost h;
  auto before = testing::snapshot_tree(h.dir.path());
  reset_write_count();
  auto full = apply_knobs(h.sys, h.knobs(), {});
  uint64_t n = write_count();
  REQUIRE(n >= 8);
  REQUIRE(revert_journal(h.sys).exit_code == kExitOk);
  for (uint64_t k = 1; k <= n; ++k) {
    CAPTURE(k);
    auto rv = testing::crash_after_write_then_revert(h.sys, h.knobs(), k);
    CHECK(rv.exit_code == kExitOk);
    CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path())) == "");
  }
}
