// Carving instance partitions out of a fixture's launch plan.
#include <doctest/doctest.h>

#include <set>

#include "../fixture/fixture_cache.hpp"
#include "common/cpulist.hpp"
#include "daemon/instances.hpp"
#include "launch/from_profile.hpp"
#include "stack/session.hpp"

using namespace epyctune;

namespace {

struct PlanOnFixture {
  stack::Session s;
  launch::LaunchPlan plan;
  PlanOnFixture() {
    s = stack::open_session({testing::cached_fixture("9754").string(), "", "epyc-9754", "", false});
    plan = launch::plan_from_profile(s.profile, s.part);
  }
};

PlanOnFixture& fixture_plan() {
  static PlanOnFixture p;
  return p;
}

std::string carve_error(const std::string& text) {
  auto& f = fixture_plan();
  try {
    daemon::carve_instances(daemon::parse_config(text, "c.toml"), f.plan, f.s.topo);
  } catch (const daemon::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("N instances get disjoint, contiguous, L3-aligned slices of the plan") {
  auto& f = fixture_plan();
  auto c = daemon::parse_config(
      "profile = \"epyc-9754\"\n"
      "[[instance]]\nname = \"a\"\nmodel = \"m\"\ndraft = \"d\"\nport = 1\n"
      "[[instance]]\nname = \"b\"\nmodel = \"m\"\ndraft = \"d\"\nport = 2\n"
      "[[instance]]\nname = \"c\"\nmodel = \"m\"\nport = 3\n",
      "c.toml");
  auto inst = daemon::carve_instances(c, f.plan, f.s.topo);
  REQUIRE(inst.size() == 3);
  std::set<int> seen;
  std::set<int> plan_cpus(f.plan.verify.cpus.begin(), f.plan.verify.cpus.end());
  plan_cpus.insert(f.plan.draft.cpus.begin(), f.plan.draft.cpus.end());
  std::map<int, int> l3_of;
  for (const auto& core : f.s.topo.cores)
    for (int cpu : core.cpus) l3_of[cpu] = core.l3;
  std::map<int, std::string> l3_owner;
  for (const auto& i : inst) {
    CAPTURE(i.cfg.name);
    CHECK(i.note.empty());
    for (int cpu : i.cpus) {
      CHECK(seen.insert(cpu).second);
      CHECK(plan_cpus.count(cpu));
    }
    // Whole L3 domains: no domain of the verify side is split between instances.
    for (int cpu : i.plan.verify.cpus) {
      auto [it, fresh] = l3_owner.emplace(l3_of[cpu], i.cfg.name);
      CHECK(it->second == i.cfg.name);
    }
    CHECK(i.plan.has_models);
    CHECK(i.plan.models.target == "m");
    CHECK(i.launch_config == "/run/epyctune/instances/" + i.cfg.name + ".toml");
    // The text is a launch config the engine accepts.
    auto back = launch::parse_launch_config(daemon::launch_config_text(i), "x.toml");
    CHECK(back.verify.cpus == i.plan.verify.cpus);
  }
  // The draft side is split between the two instances with a draft only.
  CHECK(inst[0].plan.models.draft == "d");
  CHECK(inst[2].plan.models.draft.empty());
  std::set<int> drafts(f.plan.draft.cpus.begin(), f.plan.draft.cpus.end());
  for (int cpu : inst[2].cpus) CHECK_FALSE(drafts.count(cpu));
  size_t d0 = inst[0].plan.draft.cpus.size(), d1 = inst[1].plan.draft.cpus.size();
  CHECK(d0 + d1 == f.plan.draft.cpus.size());
}

TEST_CASE("explicit CPU lists are checked against the plan and carve the rest") {
  auto& f = fixture_plan();
  const int inside = f.plan.verify.cpus.front();
  auto e = carve_error(
      "profile = \"epyc-9754\"\n[[instance]]\nname = \"a\"\nmodel = \"m\"\ncpus = \"0-1\"\n");
  // CPU 0 is housekeeping on the 9754 profile.
  CHECK(e.find("c.toml:2: [[instance]] a: CPU 0 is not in the launch plan's partition") == 0);

  auto c = daemon::parse_config(
      "profile = \"epyc-9754\"\n[[instance]]\nname = \"a\"\nmodel = \"m\"\nport = 1\ncpus = \"" +
          std::to_string(inside) + "-" + std::to_string(inside + 3) +
          "\"\n[[instance]]\nname = \"b\"\nmodel = \"m\"\nport = 2\n",
      "c.toml");
  auto inst = daemon::carve_instances(c, f.plan, f.s.topo);
  REQUIRE(inst.size() == 2);
  CHECK(inst[0].cpus == std::vector<int>{inside, inside + 1, inside + 2, inside + 3});
  for (int cpu : inst[1].cpus) CHECK((cpu < inside || cpu > inside + 3));
}

TEST_CASE("map_cpus gives each instance its own CPUs of this machine") {
  std::vector<daemon::InstancePlan> inst(3);
  daemon::map_onto_host(inst, {0, 1, 2, 3, 4}, "c.toml");
  CHECK(inst[0].host_cpus == std::vector<int>{0, 1});
  CHECK(inst[1].host_cpus == std::vector<int>{2, 3});
  CHECK(inst[2].host_cpus == std::vector<int>{4});
  try {
    daemon::map_onto_host(inst, {0, 1}, "c.toml");
    FAIL("two CPUs for three instances");
  } catch (const daemon::ConfigError& e) {
    CHECK(std::string(e.what()).find("c.toml: [engine] map_cpus: 3 instance(s)") == 0);
  }
}
