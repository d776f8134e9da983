#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>

#include "fixture/fixture_cache.hpp"
#include "host/cpu_identity.hpp"
#include "host/discover.hpp"
#include "host/json.hpp"

using namespace epyctune;
using epyctune::testing::cached_fixture;
using epyctune::testing::ScratchDir;

namespace {

struct Expect {
  std::string machine;
  int sockets, nodes, l3, cores, pus;
  uint64_t l3_bytes;
  int family, model;
  std::string microarch;
};

const Expect kMachines[] = {
    {"9754", 1, 1, 16, 128, 256, 16ull << 20, 25, 0xA0, "zen4c"},
    {"9354", 1, 1, 8, 32, 64, 32ull << 20, 25, 0x11, "zen4"},
    {"7543-2s", 2, 2, 16, 64, 128, 32ull << 20, 25, 0x01, "zen3"},
};

// The current lineup and Naples (no built-in): one L3 domain per CCD from Zen 3
// on, including Zen 5c's 16-core CCX; two per die on Zen 1.
const Expect kLineup[] = {
    {"9654", 1, 1, 12, 96, 192, 32ull << 20, 25, 0x11, "zen4"},
    {"9654-2s", 2, 2, 24, 192, 384, 32ull << 20, 25, 0x11, "zen4"},
    {"7763-2s", 2, 2, 16, 128, 256, 32ull << 20, 25, 0x01, "zen3"},
    {"9655", 1, 1, 12, 96, 192, 32ull << 20, 26, 0x02, "zen5"},
    {"9755", 1, 1, 16, 128, 256, 32ull << 20, 26, 0x02, "zen5"},
    {"9965", 1, 1, 12, 192, 384, 32ull << 20, 26, 0x11, "zen5c"},
    {"7451-2s", 2, 2, 16, 48, 96, 8ull << 20, 23, 0x01, "zen"},
};

void check_shape(const host::Topology& t, const Expect& e) {
  INFO("machine ", e.machine, " source ", t.source);
  CHECK(t.sockets == e.sockets);
  CHECK(static_cast<int>(t.numa_nodes.size()) == e.nodes);
  CHECK(static_cast<int>(t.l3_domains.size()) == e.l3);
  CHECK(t.n_cores() == e.cores);
  CHECK(t.n_cpus() == e.pus);
  CHECK(t.threads_per_core == 2);
  std::set<int> ids;
  for (const auto& d : t.l3_domains) {
    CHECK(d.size_bytes == e.l3_bytes);
    CHECK_FALSE(d.synthetic);
    CHECK(static_cast<int>(d.cores.size()) == e.cores / e.l3);
    CHECK(static_cast<int>(d.cpus.size()) == 2 * e.cores / e.l3);
    ids.insert(d.cache_id);
  }
  CHECK(static_cast<int>(ids.size()) == e.l3);  // resctrl domain ids are distinct
  // SMT siblings are N and N + cores, as Linux numbers them on EPYC.
  for (const auto& c : t.cores) {
    REQUIRE(c.cpus.size() == 2);
    CHECK(c.cpus[1] == c.cpus[0] + e.cores);
  }
  uint64_t mem = 0;
  for (const auto& n : t.numa_nodes) {
    CHECK(n.memory_bytes > (100ull << 30));
    mem += n.memory_bytes;
  }
  CHECK(mem > 0);
  // The last domain of a two-socket machine is on socket 1.
  CHECK(t.l3_domains.back().socket == e.sockets - 1);
}

}  // namespace

TEST_CASE("discover on each fixture gives the real silicon") {
  for (const auto& e : kMachines) {
    host::Sysroot root(cached_fixture(e.machine));
    auto t = host::discover(root);
    check_shape(t, e);
    CHECK(t.source == "sysroot:" + root.root().string());
    CHECK(t.cpu.vendor == "AuthenticAMD");
    CHECK(t.cpu.family == e.family);
    CHECK(t.cpu.model == e.model);
    CHECK(t.cpu.microarch == e.microarch);
    CHECK(t.cpu.source == "cpuinfo");
    CHECK(t.cpu.prefetch_control == (e.microarch != "zen3"));
    CHECK_FALSE(t.cpu.hypervisor);
    CHECK(t.cpu.brand.find(e.machine.substr(0, 4)) != std::string::npos);
  }
}

TEST_CASE("discover on the lineup's fixtures: Zen 5, Zen 5c, Genoa, Milan, Naples") {
  for (const auto& e : kLineup) {
    fixture::FixtureOptions o;
    o.machine = e.machine;
    host::Sysroot root(cached_fixture(o));
    auto t = host::discover(root);
    check_shape(t, e);
    CHECK(t.cpu.family == e.family);
    CHECK(t.cpu.model == e.model);
    CHECK(t.cpu.microarch == e.microarch);
    bool zen4_on = e.microarch != "zen3" && e.microarch != "zen";
    CHECK(t.cpu.prefetch_control == zen4_on);
    CHECK(t.cpu.has_flag("avx512f") == zen4_on);
    CHECK(t.cpu.has_flag("cat_l3") == (e.microarch != "zen"));
    CHECK(t.cpu.brand.find(e.machine.substr(0, 4)) != std::string::npos);
    // Zen 5's L1d is 48 KB; the kernel's index0 says so.
    auto l1d = root.read_value("/sys/devices/system/cpu/cpu0/cache/index0/size");
    CHECK(l1d.value_or("") == (e.family == 26 ? "48K" : "32K"));
  }
  // Naples: a NUMA node per die at NPS4, two 3-core CCXs per die, core_ids
  // with a hole after each CCX.
  auto naples = host::discover(host::Sysroot(cached_fixture("7451-2s", 4)));
  CHECK(naples.numa_nodes.size() == 8);
  CHECK(naples.l3_domains[2].numa_node == 1);
  auto core_id = host::Sysroot(cached_fixture("7451-2s", 4))
                     .read_value("/sys/devices/system/cpu/cpu3/topology/core_id");
  CHECK(core_id.value_or("") == "4");
}

TEST_CASE("discover: NPS4 and SMT off") {
  host::Sysroot nps4(cached_fixture("9754", 4));
  auto t = host::discover(nps4);
  CHECK(t.numa_nodes.size() == 4);
  CHECK(t.nodes_per_socket() == 4);
  CHECK(t.l3_domains[4].numa_node == 1);  // 2 CCDs = 4 CCXs per node
  CHECK(t.cores[127].numa_node == 3);
  fixture::FixtureOptions o;
  o.machine = "9354";
  o.smt = false;
  auto s = host::discover(host::Sysroot(testing::cached_fixture(o)));
  CHECK(s.threads_per_core == 1);
  CHECK(s.n_cpus() == 32);
  CHECK(s.n_cores() == 32);
}

TEST_CASE("discover from an lstopo XML export of each fixture") {
  ScratchDir tmp;
  for (const auto& e : kMachines) {
    auto xml = tmp.path() / (e.machine + ".xml");
    auto cmd = fmt::format(
        "HWLOC_FSROOT='{}' HWLOC_COMPONENTS=-x86 lstopo-no-graphics --no-io --of xml '{}' "
        ">/dev/null 2>&1 || HWLOC_FSROOT='{}' HWLOC_COMPONENTS=-x86 lstopo --no-io --of xml '{}'",
        cached_fixture(e.machine).string(), xml.string(), cached_fixture(e.machine).string(),
        xml.string());
    REQUIRE(std::system(cmd.c_str()) == 0);
    host::DiscoverOptions opt;
    opt.topology_xml = xml.string();
    auto t = host::discover(host::Sysroot("/nonexistent-root"), opt);
    check_shape(t, e);
    CHECK(t.source == "xml:" + xml.string());
    // Exported without the x86 backend: only the brand; the part is inferred.
    CHECK(t.cpu.source == "brand");
    CHECK(t.cpu.family == e.family);
    CHECK(t.cpu.model == e.model);
  }
  // An export made with the x86 backend carries the CPUID numbers as infos.
  {
    auto src = tmp.path() / "9354.xml";
    std::ifstream in(src);
    std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto pkg = xml.find("<object type=\"Package\"");
    REQUIRE(pkg != std::string::npos);
    auto end = xml.find(">\n", pkg) + 2;
    xml.insert(end,
               "<info name=\"CPUVendor\" value=\"AuthenticAMD\"/>\n"
               "<info name=\"CPUFamilyNumber\" value=\"25\"/>\n"
               "<info name=\"CPUModelNumber\" value=\"17\"/>\n"
               "<info name=\"CPUStepping\" value=\"1\"/>\n");
    auto dst = tmp.path() / "9354-x86.xml";
    std::ofstream(dst) << xml;
    host::DiscoverOptions opt;
    opt.topology_xml = dst.string();
    auto t = host::discover(host::Sysroot("/"), opt);
    CHECK(t.cpu.source == "hwloc-xml");
    CHECK(t.cpu.model == 0x11);
    CHECK(t.cpu.stepping == 1);
    CHECK(t.cpu.microarch == "zen4");
  }
  host::DiscoverOptions bad;
  bad.topology_xml = (tmp.path() / "missing.xml").string();
  CHECK_THROWS_AS(host::discover(host::Sysroot("/"), bad), host::DiscoveryError);
  CHECK_THROWS_WITH_AS(host::discover(host::Sysroot(tmp.path())),
                       doctest::Contains("not a host tree"), host::DiscoveryError);
}

TEST_CASE("live discovery is read-only and sane") {
  auto t = host::discover(host::Sysroot("/"));
  CHECK(t.source == "live");
  CHECK(t.n_cpus() >= 1);
  CHECK(t.n_cores() >= 1);
  CHECK(t.sockets >= 1);
  CHECK_FALSE(t.l3_domains.empty());
  CHECK_FALSE(t.cpu.vendor.empty());
  CHECK(t.cpu.source == "cpuid");
}

TEST_CASE("cpu identity: family/model decide, the codename is a hint") {
  CHECK(host::microarch_for("AuthenticAMD", 26, 2) == "zen5");
  CHECK(host::microarch_for("AuthenticAMD", 25, 0xA0) == "zen4c");
  CHECK(host::microarch_for("AuthenticAMD", 25, 0x11) == "zen4");
  CHECK(host::microarch_for("AuthenticAMD", 25, 0x01) == "zen3");
  CHECK(host::microarch_for("GenuineIntel", 6, 0x8F) == "unknown");
  auto id = host::parse_cpuinfo_identity(
      "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
      "model name\t: AMD EPYC\nstepping\t: 1\nflags\t\t: fpu avx2 hypervisor\n\nprocessor\t: 1\n");
  CHECK(id.family == 26);
  CHECK(id.brand == "AMD EPYC");
  CHECK(id.hypervisor);
  CHECK(id.has_flag("avx2"));
  CHECK(id.codename == "Turin");
  CHECK(host::cpuid_dump_prefetch_control("80000021 0 0 0 => 2000 0 0 0\n"));
  CHECK_FALSE(host::cpuid_dump_prefetch_control("80000021 0 0 0 => 1fff 0 0 0\n"));
  auto x = host::identity_from_hwloc_infos("", "", "", "", "AMD EPYC 97545 Processor");
  CHECK(x.family == 0);
  // Zen 5 parts from the brand alone (an XML without CPUID infos).
  auto turin = host::identity_from_hwloc_infos("", "", "", "", "AMD EPYC 9755 128-Core Processor");
  CHECK(turin.family == 26);
  CHECK(turin.microarch == "zen5");
  CHECK(turin.codename == "Turin");
  auto dense = host::identity_from_hwloc_infos("", "", "", "", "AMD EPYC 9965 192-Core Processor");
  CHECK(dense.model == 0x11);
  CHECK(dense.microarch == "zen5c");
  CHECK(dense.codename == "Turin Dense");
  auto naples = host::identity_from_hwloc_infos("", "", "", "", "AMD EPYC 7451 24-Core Processor");
  CHECK(naples.family == 23);
  CHECK(naples.microarch == "zen");
}

TEST_CASE("cpu identity: bytes that are not UTF-8 are replaced, so detect --json can print them") {
  auto id = host::parse_cpuinfo_identity(
      "vendor_id\t: Authentic\xA9MD\nmodel name\t: AMD EPYC \xFF\xFE 9754\nflags\t: avx2 x\xC3\n");
  auto j = host::cpu_to_json(id);
  std::string text;
  REQUIRE_NOTHROW(text = j.dump());
  CHECK(id.os_model_name == "AMD EPYC \xEF\xBF\xBD\xEF\xBF\xBD 9754");
  CHECK(id.has_flag("avx2"));
  CHECK(id.has_flag("x\xEF\xBF\xBD"));
  auto h = host::identity_from_hwloc_infos("Auth\xA9", "25", "17", "1", "EPYC\x80");
  REQUIRE_NOTHROW((void)host::cpu_to_json(h).dump());
  CHECK(h.brand == "EPYC\xEF\xBF\xBD");
}
