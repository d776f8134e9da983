#include <doctest/doctest.h>

#include "common/cpulist.hpp"
#include "fixture/fixture_cache.hpp"
#include "host/discover.hpp"
#include "profile/resolve.hpp"

using namespace epyctune;
using namespace epyctune::profile;
using common::format_cpulist;
using epyctune::testing::cached_fixture;

namespace {
host::Topology topo(const std::string& machine, int nps = 1) {
  return host::discover(host::Sysroot(cached_fixture(machine, nps)));
}
}  // namespace

TEST_CASE("9754: draft = CCD 0 = L3 domains 0 and 1, minus two housekeeping cores") {
  auto r = resolve_partition(load_profile("9754"), topo("9754"));
  CHECK(r.draft.l3 == std::vector<int>{0, 1});
  CHECK(r.verify.l3.size() == 14);
  CHECK(format_cpulist(r.draft.cpus) == "2-15");
  CHECK(format_cpulist(r.verify.cpus) == "16-127");
  CHECK(format_cpulist(r.housekeeping_cpus) == "0-1,128-129");
  CHECK(format_cpulist(r.idle_sibling_cpus) == "130-255");
  CHECK(r.draft.nodes == std::vector<int>{0});
}

TEST_CASE("9754 NPS4: the draft CCD's node, verify on all four") {
  auto r = resolve_partition(load_profile("9754"), topo("9754", 4));
  CHECK(r.draft.nodes == std::vector<int>{0});
  CHECK(r.verify.nodes == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("7543-2s: draft on socket 0's first CCD, housekeeping one core per socket") {
  auto r = resolve_partition(load_profile("7543"), topo("7543-2s"));
  CHECK(format_cpulist(r.draft.cpus) == "1-3");
  CHECK(format_cpulist(r.housekeeping_cpus) == "0,32,64,96");
  CHECK(format_cpulist(r.verify.cpus) == "4-31,33-63");
  CHECK(r.verify.nodes == std::vector<int>{0, 1});
}

TEST_CASE("SMT siblings join the partition when asked") {
  auto p = load_profile("9354");
  p.partition.use_smt_siblings = true;
  auto r = resolve_partition(p, topo("9354"));
  CHECK(format_cpulist(r.draft.cpus) == "1-3,33-35");
  CHECK(r.idle_sibling_cpus.empty());
}

TEST_CASE("resolve refuses domains the host lacks and an empty draft") {
  auto p = load_profile("9354");
  p.partition.draft_l3 = {12};
  CHECK_THROWS_WITH_AS(resolve_partition(p, topo("9354")), doctest::Contains("L3 domain"),
                       ProfileError);
  auto q = load_profile("9354");
  q.partition.housekeeping_cores = {0, 1, 2, 3};
  CHECK_THROWS_WITH_AS(resolve_partition(q, topo("9354")), doctest::Contains("no CPU left"),
                       ProfileError);
}

TEST_CASE("match: each profile fits its own machine and no other") {
  const std::pair<const char*, const char*> pairs[] = {
      {"9754", "9754"}, {"9354", "9354"}, {"7543", "7543-2s"}};
  for (auto [prof, machine] : pairs) {
    auto t = topo(machine);
    for (auto [other, unused] : pairs) {
      (void)unused;
      auto m = match_profile(load_profile(other), t);
      INFO(prof, " profile ", other, " on ", machine);
      CHECK(m.matches == (std::string(other) == prof));
      if (m.matches)
        CHECK(m.score == 100);
      else
        CHECK_FALSE(m.mismatches.empty());
    }
  }
  auto m = match_profile(load_profile("9754"), topo("9354"));
  bool named = false;
  for (const auto& s : m.mismatches) named |= s == "cores per socket: profile 128, host 32";
  CHECK(named);
}

TEST_CASE("require_match names both values unless forced") {
  auto p = load_profile("9754");
  auto t = topo("7543-2s");
  CHECK_THROWS_WITH_AS(require_match(p, t, false), doctest::Contains("sockets: profile 1, host 2"),
                       ProfileError);
  CHECK_NOTHROW(require_match(p, t, true));
  CHECK_NOTHROW(require_match(p, topo("9754"), false));
  // A Zen 5 host (family 26) is no Milan.
  t.cpu.family = 26;
  auto m = match_profile(load_profile("7543"), t);
  CHECK_FALSE(m.matches);
  CHECK(m.mismatches.front().find("family: profile 25 (19h), host 26 (1Ah)") != std::string::npos);
}

TEST_CASE("housekeeping CPUs take their whole core out of the partition") {
  auto p = load_profile("9354");
  p.partition.housekeeping_cores = {};
  p.partition.housekeeping_cpus = {37};  // SMT sibling of core 5
  auto r = resolve_partition(p, topo("9354"));
  CHECK(r.housekeeping_cores == std::vector<int>{5});
  CHECK(format_cpulist(r.housekeeping_cpus) == "5,37");
  CHECK(format_cpulist(r.draft.cpus) == "0-3");
  CHECK(format_cpulist(r.verify.cpus) == "4,6-31");
  // Domains in neither list go to housekeeping too.
  p.partition.verify_l3 = {1, 2, 3, 4, 5, 6};
  auto q = resolve_partition(p, topo("9354"));
  CHECK(format_cpulist(q.housekeeping_cpus) == "5,28-31,37,60-63");
}
