// The stack end to end on the three fixture machines: apply -> verify passes
// -> revert -> the tree is byte-identical; idempotence; crash after every k-th
// write; MSR refusal on a CPU without PrefetchControl.
#include <doctest/doctest.h>

#include <chrono>
#include <fstream>

#include "stack/apply.hpp"
#include "stack/checklist.hpp"
#include "stack/host_writes.hpp"
#include "stack/plan.hpp"
#include "stack/revert.hpp"
#include "stack_harness.hpp"
#include "stack_test_util.hpp"
#include "tree_snapshot.hpp"

using namespace epyctune;
using namespace epyctune::stack;

namespace {

std::string failures(const Checklist& c) {
  std::string s;
  for (const auto& l : c.lines)
    if (l.result == CheckResult::Fail) s += l.step + "/" + l.name + ": " + l.reason + "\n";
  return s;
}

std::string apply_problems(const ApplyResult& r) {
  std::string s = r.error;
  for (const auto& o : r.knobs)
    if (o.status == stack::KnobStatus::Failed || o.status == stack::KnobStatus::Mismatch)
      s += "\n" + o.name + ": " + o.reason;
  return s;
}

void round_trip(const std::string& machine, fixture::FixtureOptions opt = {},
                bool ignore_missing = false) {
  CAPTURE(machine);
  testing::StackHost h(machine, opt);
  auto before = testing::snapshot_tree(h.dir.path());
  auto knobs = h.knobs();
  REQUIRE(knobs.size() > 20);

  auto pre = make_checklist(plan_knobs(h.sys, knobs), h.profile.name, false);
  CHECK(pre.failed > 0);  // an untuned host does not verify

  auto r = apply_knobs(h.sys, knobs, {});
  CHECK_MESSAGE(r.exit_code == kExitOk, apply_problems(r));
  CHECK(r.changed);
  CHECK(r.reboot_required);

  auto after = make_checklist(plan_knobs(h.sys, h.knobs()), h.profile.name, ignore_missing);
  CHECK_MESSAGE(after.ok(), failures(after));
  CHECK(after.passed > 20);

  auto again = apply_knobs(h.sys, h.knobs(), {});
  CHECK(!again.changed);
  CHECK(again.exit_code == kExitOk);

  auto rv = revert_journal(h.sys);
  CHECK(rv.exit_code == kExitOk);
  CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path())) == "");
}

}  // namespace

TEST_CASE("9354 (acpi-cpufreq): apply, verify, idempotent, revert byte-identical") {
  round_trip("9354");
}

TEST_CASE("9754 (amd-pstate active): apply, verify, idempotent, revert byte-identical") {
  fixture::FixtureOptions o;
  o.cpufreq_driver = "amd-pstate-active";
  round_trip("9754", o);
}

TEST_CASE("7543-2s (amd-pstate passive, NPS1 x 2 sockets): round trip") {
  fixture::FixtureOptions o;
  o.cpufreq_driver = "amd-pstate-passive";
  round_trip("7543-2s", o);
}

TEST_CASE("MSR writes refused without AMD + family + the PrefetchControl CPUID bit") {
  testing::StackHost h("9354");
  h.profile.prefetch.value = 0x20;  // L2 up/down prefetcher off: a real change
  auto plans = plan_knobs(h.sys, h.knobs("prefetch"));
  REQUIRE(plans.size() == h.part.draft.cpus.size() + h.part.verify.cpus.size());
  CHECK(plans[0].status == PlanStatus::Change);

  auto refused = [&](host::Topology t, const std::string& why) {
    StepContext ctx{h.sys, h.profile, t, h.part, ""};
    auto knobs = build_knobs(ctx, {6});
    REQUIRE(knobs.size() == 1);
    CHECK(knobs[0].unsupported.find(why) != std::string::npos);
    auto before = testing::snapshot_tree(h.dir.path());
    auto r = apply_knobs(h.sys, knobs, {});
    CHECK(r.knobs[0].status == stack::KnobStatus::Skipped);
    CHECK(testing::diff_trees(before, testing::snapshot_tree(h.dir.path())) == "");
  };
  auto intel = h.topo;
  intel.cpu.vendor = "GenuineIntel";
  refused(intel, "GenuineIntel");
  auto old = h.topo;
  old.cpu.family = 0x17;
  refused(old, "family 23");
  auto vm = h.topo;
  vm.cpu.prefetch_control = false;
  refused(vm, "Fn8000_0021");

  // The family-10h DC_CFG recipe is refused even when whitelisted.
  profile::ExtraMsr dc;
  dc.address = 0xC0011022;
  dc.mask = 1ull << 13;
  dc.value = 1ull << 13;
  dc.reason = "a guide said so";
  auto p = h.profile;
  p.prefetch.extra = {dc};
  StepContext ctx{h.sys, p, h.topo, h.part, ""};
  auto knobs = build_knobs(ctx, {6});
  CHECK(knobs.back().unsupported.find("0xC0011022") != std::string::npos);
  // Another MSR as prefetch.msr without a whitelist entry is refused.
  p.prefetch.extra.clear();
  p.prefetch.msr = 0xC0010015;
  StepContext ctx2{h.sys, p, h.topo, h.part, ""};
  CHECK(build_knobs(ctx2, {6})[0].unsupported.find("not whitelisted") != std::string::npos);
  // A mask reaching PrefetchControl's undocumented bits (Zen 5 resets 6-9 to
  // 0x3C0) is refused even in a profile built in code, which skips loading.
  p.prefetch.msr = 0xC0000108;
  p.prefetch.mask = 0x3EF;
  StepContext ctx3{h.sys, p, h.topo, h.part, ""};
  auto wide = build_knobs(ctx3, {6});
  REQUIRE(wide.size() == 1);
  CHECK(wide[0].unsupported.find("not documented") != std::string::npos);
}

TEST_CASE("9354: crash after every k-th write, then revert: byte-identical") {
  // SMT off halves the tree, and with it the cost of comparing it ~90 times.
  fixture::FixtureOptions o;
  o.smt = false;
  testing::StackHost h("9354", o);
  h.profile.prefetch.value = 0x20;
  auto before = testing::snapshot_tree(h.dir.path());
  auto knobs = h.knobs();
  reset_write_count();
  REQUIRE(apply_knobs(h.sys, knobs, {}).exit_code == kExitOk);
  const uint64_t n = write_count();
  REQUIRE(n > 50);
  REQUIRE(revert_journal(h.sys).exit_code == kExitOk);
  // Every k in the normal build. The ASan+UBSan build runs the same code
  // paths for memory errors, not new crash points, and is ~10x slower per
  // iteration: there a stride (plus the last write) keeps the suite fast.
#if defined(__SANITIZE_ADDRESS__)
  const uint64_t stride = 9;
#else
  const uint64_t stride = 1;
#endif
  for (uint64_t k = 1; k <= n; k = (k + stride > n && k != n) ? n : k + stride) {
    CAPTURE(k);
    auto rv = testing::crash_after_write_then_revert(h.sys, knobs, k);
    CHECK(rv.exit_code == kExitOk);
    auto diff = testing::diff_trees(before, testing::snapshot_tree(h.dir.path(), &before));
    CHECK(diff == "");
    if (!diff.empty()) break;
  }
}

TEST_CASE("partial hugepage reservation is reported, not hidden") {
  testing::StackHost h("9354");
  // A kernel that cannot find enough free 2 MB pages reserves fewer and shows
  // the smaller count; a plain file needs the test to play that part.
  set_write_hooks({{}, [](const std::string& p) {
                     if (p.find("hugepages-2048kB/nr_hugepages") != std::string::npos)
                       std::ofstream(p) << "1000\n";
                   }});
  auto r = apply_knobs(h.sys, h.knobs("numa"), {});
  clear_write_hooks();
  CHECK(r.exit_code == kExitFailed);
  bool seen = false;
  for (const auto& o : r.knobs)
    if (o.name == "node0 2M hugepages") {
      seen = true;
      CHECK(o.status == stack::KnobStatus::Mismatch);
      CHECK(o.after == "1000");
      CHECK(o.reason.find("reserved fewer 2M pages than asked") != std::string::npos);
    }
  CHECK(seen);
  auto c = make_checklist(plan_knobs(h.sys, h.knobs("numa")), h.profile.name, false);
  CHECK(c.failed == 1);
  CHECK(revert_journal(h.sys).exit_code == kExitOk);
}
