#include <doctest/doctest.h>

#include <filesystem>

#include "fixture/fixture_cache.hpp"
#include "host/capabilities.hpp"
#include "host/discover.hpp"

using namespace epyctune;
using epyctune::testing::cached_fixture;

namespace {
host::Capabilities probe(const fixture::FixtureOptions& o) {
  host::Sysroot r(cached_fixture(o));
  return host::probe_capabilities(r, host::discover(r));
}
fixture::FixtureOptions machine(const std::string& m) {
  fixture::FixtureOptions o;
  o.machine = m;
  return o;
}
}  // namespace

TEST_CASE("capabilities of a Genoa fixture") {
  auto c = probe(machine("9354"));
  CHECK(c.smt_control.supported);
  CHECK(c.smt_state == "on");
  CHECK(c.cpufreq.supported);
  CHECK(c.cpufreq_driver == "acpi-cpufreq");
  CHECK(c.governors.size() == 6);
  CHECK(c.resctrl.supported);
  CHECK(c.resctrl_mounted);
  CHECK(c.cbm_mask == "ffff");
  CHECK(c.num_closids == 16);
  CHECK(c.msr.supported);
  CHECK(c.prefetch_control.supported);
  CHECK(c.hugepages_2m.supported);
  CHECK(c.hugepages_1g.supported);
  CHECK(c.thp_mode == "madvise");
  CHECK(c.numa_balancing.supported);
  CHECK_FALSE(c.numa_balancing_on);
  CHECK(c.irq_affinity.supported);
  CHECK(c.managed_irqs == 16);
  CHECK(c.irqs > c.managed_irqs);
  CHECK(c.isolated_cpus.empty());
  CHECK(c.lockdown == "none");
  CHECK(c.cmdline.find("BOOT_IMAGE=") == 0);
}

TEST_CASE("capabilities say why not") {
  auto milan = probe(machine("7543-2s"));
  CHECK_FALSE(milan.prefetch_control.supported);
  CHECK(milan.prefetch_control.reason.find("Zen 3") != std::string::npos);
  CHECK(milan.numa_balancing_on);  // two nodes: the kernel's default

  auto o = machine("9354");
  o.resctrl_mounted = false;
  o.smt = false;
  o.cpufreq_driver = "amd-pstate-active";
  auto c = probe(o);
  CHECK(c.resctrl.supported);
  CHECK_FALSE(c.resctrl_mounted);
  CHECK(c.resctrl.detail.find("not mounted") != std::string::npos);
  CHECK(c.smt_state == "off");
  CHECK(c.cpufreq_driver == "amd-pstate-epp");
  CHECK(c.amd_pstate_mode == "active");
  CHECK(c.governors == std::vector<std::string>{"performance", "powersave"});
}

TEST_CASE("capabilities on a bare tree: everything unsupported, with reasons") {
  testing::ScratchDir d;
  auto fx = d.path() / "t";
  std::filesystem::create_directories(fx / "sys/devices");
  std::filesystem::copy(cached_fixture("9354") / "proc", fx / "proc",
                        std::filesystem::copy_options::recursive);
  std::filesystem::copy(cached_fixture("9354") / "sys/devices/system", fx / "sys/devices/system",
                        std::filesystem::copy_options::recursive);
  for (auto p : {"sys/devices/system/cpu/smt", "sys/devices/system/cpu/cpu0/cpufreq"})
    std::filesystem::remove_all(fx / p);
  host::Sysroot r(fx);
  auto t = host::discover(r);
  auto c = host::probe_capabilities(r, t);
  CHECK_FALSE(c.smt_control.supported);
  CHECK(c.smt_control.reason.find("smt/control") != std::string::npos);
  CHECK_FALSE(c.cpufreq.supported);
  CHECK(c.cpufreq.reason.find("no cpufreq driver") != std::string::npos);
  CHECK_FALSE(c.msr.supported);
  CHECK(c.msr.reason.find("modprobe msr") != std::string::npos);
  CHECK_FALSE(c.hugepages_2m.supported);
  CHECK_FALSE(c.thp.supported);
}

TEST_CASE("bracketed sysfs choices") {
  CHECK(host::bracketed_choice("always [madvise] never") == "madvise");
  CHECK(host::bracketed_choice("[none] integrity confidentiality") == "none");
  CHECK(host::bracketed_choice("none") == "");
}

TEST_CASE("live capabilities probe is read-only and answers every field") {
  host::Sysroot live("/");
  auto c = host::probe_capabilities(live, host::discover(live));
  for (const auto* cap : {&c.smt_control, &c.cpufreq, &c.resctrl, &c.msr, &c.prefetch_control,
                          &c.hugepages_2m, &c.numa_balancing, &c.thp, &c.irq_affinity})
    CHECK((cap->supported || !cap->reason.empty()));
}
