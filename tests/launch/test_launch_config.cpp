// The launch plan from profile to file to the engine's parse: one partition.
#include <doctest/doctest.h>

#include "../fixture/fixture_cache.hpp"
#include "host/discover.hpp"
#include "launch/from_profile.hpp"
#include "launch/launch_config.hpp"
#include "profile/loader.hpp"
#include "profile/resolve.hpp"
#include "stack/steps.hpp"

using namespace epyctune;

namespace {

struct Planned {
  host::Topology topo;
  profile::Profile prof;
  profile::HostPartition part;
  launch::LaunchPlan plan;
};

Planned plan_for(const std::string& machine) {
  Planned p;
  host::Sysroot sys(testing::cached_fixture(machine));
  p.topo = host::discover(sys);
  p.prof = profile::load_profile(machine == "7543-2s" ? "7543" : machine);
  p.part = profile::resolve_partition(p.prof, p.topo);
  p.plan = launch::plan_from_profile(p.prof, p.part);
  return p;
}

// What steps 7 and 8 write into the launch config, concatenated as the
// journaled apply leaves the file.
std::string stack_written(const Planned& p, const std::string& machine) {
  host::Sysroot sys(testing::cached_fixture(machine));
  stack::StepContext ctx{sys, p.prof, p.topo, p.part, ""};
  std::string file;
  for (const auto& k : stack::build_knobs(ctx, {7, 8}))
    if (k.loc.kind == stack::KnobKind::File) file += *k.desired;
  return file;
}

}  // namespace

TEST_CASE("launch plan round trip: profile -> steps 7/8 file -> engine parse, all profiles") {
  for (std::string machine : {"9754", "9354", "7543-2s"}) {
    CAPTURE(machine);
    auto p = plan_for(machine);
    const auto file = stack_written(p, machine);
    auto parsed = launch::parse_launch_config(file, "engine.toml");
    CHECK(parsed.has_weights);
    CHECK(parsed.has_spec);
    CHECK(parsed.draft.cpus == p.part.draft.cpus);
    CHECK(parsed.verify.cpus == p.part.verify.cpus);
    CHECK(parsed.draft.nodes == p.part.draft.nodes);
    CHECK(parsed.verify.nodes == p.part.verify.nodes);
    CHECK(parsed.draft.l3 == p.part.draft.l3);
    CHECK(parsed.verify.l3 == p.part.verify.l3);
    CHECK(parsed.draft.group == p.prof.cat.draft_group);
    CHECK(parsed.verify.group == p.prof.cat.verify_group);
    CHECK(parsed.housekeeping_cpus == p.part.housekeeping_cpus);
    CHECK(parsed.weights.target_nodes == p.plan.weights.target_nodes);
    CHECK(parsed.weights.layout == p.prof.weights.layout);
    CHECK(launch::side_threads(parsed.draft) == launch::side_threads(p.plan.draft));
    CHECK(launch::side_threads(parsed.verify) == launch::side_threads(p.plan.verify));
    // And the whole-file writer agrees with the per-section one.
    CHECK(launch::to_toml(p.plan) == file);
  }
}

TEST_CASE("the 9754 draft partition is the profile's: L3 domains 0-1 (CCD 0)") {
  auto p = plan_for("9754");
  CHECK(p.plan.draft.l3 == std::vector<int>{0, 1});
  // L3 0 and 1 hold cores 0-15; cores 0 and 1 are housekeeping.
  std::vector<int> want;
  for (int c = 2; c < 16; ++c) want.push_back(c);
  CHECK(p.plan.draft.cpus == want);
  CHECK(p.plan.verify.cpus.front() == 16);
  auto parsed = launch::parse_launch_config(launch::to_toml(p.plan), "x.toml");
  CHECK(parsed.draft.cpus == want);
  CHECK(parsed.draft.l3 == std::vector<int>{0, 1});
}

TEST_CASE("models section round trips") {
  launch::LaunchPlan p = plan_for("9354").plan;
  p.has_models = true;
  p.models = {"/m/t.gguf", "/m/d.gguf", 0};
  auto q = launch::parse_launch_config(launch::to_toml(p), "x.toml");
  CHECK(q.has_models);
  CHECK(q.models.target == "/m/t.gguf");
  CHECK(q.models.draft == "/m/d.gguf");
  CHECK(q.profile == "epyc-9354");
}

namespace {
std::string error_of(const std::string& text) {
  try {
    launch::parse_launch_config(text, "engine.toml");
  } catch (const launch::LaunchConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("bad launch configs name the file, the line and the fix") {
  CHECK(error_of("[spec]\ndraft_cpus = \"0-1\"\nverify_cpus = \"2-3\"\ndraft_lne = 4\n")
            .find("engine.toml:4: [spec] unknown key 'draft_lne'") != std::string::npos);
  CHECK(
      error_of("[spec]\ndraft_cpus = \"0-3\"\nverify_cpus = \"2-5\"\n").find("overlap on CPU 2") !=
      std::string::npos);
  CHECK(error_of("[spec]\nverify_cpus = \"2-5\"\n").find("missing key 'draft_cpus'") !=
        std::string::npos);
  CHECK(error_of("[spec]\ndraft_cpus = \"0-x\"\nverify_cpus = \"2\"\n").find("engine.toml:2:") !=
        std::string::npos);
  CHECK(error_of("[weights]\nlayout = \"spread\"\n").find("expected one of interleave") !=
        std::string::npos);
  CHECK(error_of("[weights\n").find("engine.toml:1:") != std::string::npos);
  CHECK(error_of("[engine]\nx = 1\n").find("unknown entry 'engine'") != std::string::npos);
  CHECK(error_of("").find("empty launch config") != std::string::npos);
  CHECK(error_of("[spec]\ndraft_cpus = \"0-1\"\nverify_cpus = \"2-3\"\ndraft_threads = 3\n")
            .find("exceeds the 2 CPUs") != std::string::npos);
}
