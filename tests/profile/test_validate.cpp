#include <doctest/doctest.h>

#include "fixture/fixture_cache.hpp"
#include "host/discover.hpp"
#include "profile/loader.hpp"
#include "profile/resolve.hpp"

using namespace epyctune;
using namespace epyctune::profile;
using epyctune::testing::cached_fixture;

namespace {
Diagnostic host_fails(const std::string& text, const std::string& machine) {
  auto p = load_profile_text(text, "user.toml");
  host::Sysroot root(cached_fixture(machine));
  auto t = host::discover(root);
  try {
    validate_profile(p, &t, &root);
  } catch (const ProfileError& e) {
    return e.diagnostics().front();
  }
  FAIL("expected a ProfileError");
  return {};
}
}  // namespace

TEST_CASE("built-in profiles validate against their own fixture") {
  for (auto [name, machine] : {std::pair{"9754", "9754"}, {"9354", "9354"}, {"7543", "7543-2s"}}) {
    host::Sysroot root(cached_fixture(machine));
    auto t = host::discover(root);
    CHECK_NOTHROW(validate_profile(load_profile(name), &t, &root));
  }
}

TEST_CASE("host checks: domains, cores, CPUs") {
  auto d = host_fails("include = \"9354\"\n[partition]\ndraft_l3 = [8]\n", "9354");
  CHECK(d.line == 3);
  CHECK(d.what == "L3 domain 8 does not exist: this host has 8 (0-7)");
  auto c = host_fails("include = \"9354\"\n[partition]\nhousekeeping_cores = [40]\n", "9354");
  CHECK(c.what.find("core 40 does not exist") != std::string::npos);
  auto cpu = host_fails("include = \"9354\"\n[partition]\nhousekeeping_cpus = \"0,64\"\n", "9354");
  CHECK(cpu.what.find("CPU 64 is not online on this host (online: 0-63)") != std::string::npos);
}

TEST_CASE("host checks: hugepages vs node memory") {
  // 9354 NPS1: one node of ~382 GiB; 200000 x 2 MiB = 390 GiB.
  auto d = host_fails("include = \"9354\"\n[numa]\nhugepages_2m_per_node = 200000\n", "9354");
  CHECK(d.line == 3);
  CHECK(d.what.find("hugepages need") != std::string::npos);
  CHECK(d.what.find("node 0") != std::string::npos);
  auto a = host_fails("include = \"9354\"\n[numa]\nmodel_gb = 500.0\n", "9354");
  CHECK(a.what.find("hugepages need") != std::string::npos);
  CHECK(a.line == 3);
  auto g = host_fails("include = \"9354\"\n[numa]\nhugepages_1g_per_node = 400\n", "9354");
  CHECK(g.what.find("hugepages need") != std::string::npos);
}

TEST_CASE("host checks: cache-way masks vs cbm_mask") {
  auto d = host_fails("include = \"9354\"\n[cat]\ndraft_cbm = \"1ffff\"\n", "9354");
  CHECK(d.line == 3);
  CHECK(d.what == "mask 1ffff has bits outside this host's info/L3/cbm_mask ffff");
}

TEST_CASE("cross-key checks need no host") {
  CHECK_THROWS_WITH_AS(
      load_profile_text("include = \"base\"\n[partition]\ndraft_l3 = [0]\nverify_l3 = [0, 1]\n",
                        "u.toml"),
      doctest::Contains("u.toml:4:13: L3 domain 0 is both draft and verify"), ProfileError);
  CHECK_THROWS_WITH_AS(load_profile_text("[prefetch]\nvalue = 0x40\n", "u.toml"),
                       doctest::Contains("sets bits outside mask"), ProfileError);
  CHECK_THROWS_WITH_AS(
      load_profile_text("[[prefetch.extra]]\naddress = 0xC0011022\nmask = 0xA000\nvalue = 0xA000\n"
                        "reason = \"a guide said so\"\n",
                        "u.toml"),
      doctest::Contains("DC_CFG"), ProfileError);
  CHECK_THROWS_WITH_AS(load_profile_text("include = \"base\"\n[bios]\nexpect_nps = 3\n", "u.toml"),
                       doctest::Contains("NPS3 is not offered"), ProfileError);
}

TEST_CASE("hugepages: validate sizes 'auto' in GiB = 2^30, as the numa step reserves it") {
  NumaStep n;
  n.model_gb = 1.0;
  n.hugepage_headroom = 1.0;
  CHECK(auto_hugepages_2m_per_node(n, 1) == 512);  // 2^30 / 2 MiB
  CHECK(auto_hugepages_2m_per_node(n, 2) == 256);
  n.model_gb = 0;
  CHECK(auto_hugepages_2m_per_node(n, 1) == 0);
  // 9354 NPS1, one node; 90% of it is ~343.8 GiB. 320 "GB" x 1.10 headroom is
  // 352 GiB when GB means 2^30 (too much), but 328 GiB were it 1e9 (fits):
  // the check must refuse what the step would reserve.
  auto d = host_fails("include = \"9354\"\n[numa]\nmodel_gb = 320.0\n", "9354");
  CHECK(d.line == 3);
  CHECK(d.what.find("hugepages need 352.0 GiB") != std::string::npos);
}
