// Discovery and `detect` on hwloc's own test topologies (tests/data/topology,
// see its README), and what a topology XML that cannot be loaded is told.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include "host/discover.hpp"
#include "profile/detect.hpp"
#include "test_util.hpp"

using namespace epyctune;
using epyctune::testing::read_file;
using epyctune::testing::TempDir;
using epyctune::testing::write_file;

namespace {

std::string data(const std::string& file) {
  return std::string(EPYCTUNE_TEST_DATA) + "/topology/" + file;
}

host::Topology from_xml(const std::string& path) {
  host::DiscoverOptions opt;
  opt.topology_xml = path;
  return host::discover(host::Sysroot("/nonexistent-root"), opt);
}

std::string load_error(const std::string& path) {
  try {
    from_xml(path);
  } catch (const host::DiscoveryError& e) {
    return e.what();
  }
  FAIL("loaded");
  return "";
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("hwloc test topologies: sockets, L3 domains, cores and CPUs as lstopo counts them") {
  struct Expect {
    const char* file;
    int sockets, l3, cores, cpus, nodes;
    bool synthetic_l3;  // no L3 in the file: one domain per package
  };
  // From lstopo-no-graphics 2.9 --only package|l3cache|core|pu|numanode.
  const Expect all[] = {
      {"AMD-17h-Zen-2xEpyc-7451.xml", 2, 16, 48, 96, 1, false},
      {"Intel-Skylake-2xXeon6140.xml", 2, 2, 36, 72, 1, false},
      {"AMD-K8-SantaRosa-2xOpteron-2218.xml", 2, 2, 4, 4, 1, true},
      {"16em64t-4s2c2t.xml", 4, 4, 8, 16, 1, false},
      {"16em64t-4s2c2t-offlines.xml", 4, 4, 6, 7, 1, false},
      {"16amd64-8n2c-cpusets.xml", 6, 6, 10, 10, 5, true},
  };
  for (const auto& e : all) {
    CAPTURE(e.file);
    auto t = from_xml(data(e.file));
    CHECK(t.sockets == e.sockets);
    CHECK(t.l3_domains.size() == static_cast<size_t>(e.l3));
    CHECK(t.n_cores() == e.cores);
    CHECK(t.n_cpus() == e.cpus);
    CHECK(t.numa_nodes.size() == static_cast<size_t>(e.nodes));
    for (const auto& d : t.l3_domains) CHECK(d.synthetic == e.synthetic_l3);
    // Every core is in exactly one domain, and the domains cover every core.
    size_t in_domains = 0;
    for (const auto& d : t.l3_domains) in_domains += d.cores.size();
    CHECK(in_domains == static_cast<size_t>(e.cores));
  }
}

TEST_CASE("detect on two sockets with one NUMA node lists both sockets' L3 domains, as NPS0") {
  host::DiscoverOptions opt;
  opt.topology_xml = data("AMD-17h-Zen-2xEpyc-7451.xml");
  auto r = profile::run_detect(host::Sysroot("/nonexistent-root"), opt);
  const auto& t = r.topology;
  REQUIRE(t.numa_nodes.size() == 1);
  CHECK(t.numa_nodes[0].sockets == std::vector<int>{0, 1});
  CHECK(t.nodes_per_socket() == 0);
  auto text = profile::detect_to_text(r);
  CAPTURE(text);
  // Today's text listed socket 0's 8 domains and called it NPS1.
  CHECK(count(text, "      L3 #") == 16);
  CHECK(text.find("L3 #15 ") != std::string::npos);
  CHECK(text.find("NPS0") != std::string::npos);
  CHECK(text.find("NPS1") == std::string::npos);
  CHECK(text.find("(spans sockets 0-1)") != std::string::npos);
  auto j = profile::detect_to_json(r);
  CHECK(j["topology"]["nodes_per_socket"] == 0);
  CHECK(j["topology"]["socket_list"][1]["l3_domains"].size() == 8);
  CHECK(j["topology"]["socket_list"][1]["numa_nodes"].size() == 1);
}

TEST_CASE("detect text on every hwloc test topology shows every L3 domain once") {
  for (const char* f :
       {"Intel-Skylake-2xXeon6140.xml", "AMD-K8-SantaRosa-2xOpteron-2218.xml", "16em64t-4s2c2t.xml",
        "16em64t-4s2c2t-offlines.xml", "16amd64-8n2c-cpusets.xml"}) {
    CAPTURE(f);
    host::DiscoverOptions opt;
    opt.topology_xml = data(f);
    auto r = profile::run_detect(host::Sysroot("/nonexistent-root"), opt);
    auto text = profile::detect_to_text(r);
    CAPTURE(text);
    for (const auto& d : r.topology.l3_domains)
      CHECK(count(text, fmt::format("L3 #{} ", d.index)) == 1);
  }
}

TEST_CASE("a topology XML that cannot be loaded says why") {
  TempDir t;
  auto missing = load_error(t.str() + "/nope.xml");
  CHECK(missing.find("no such topology XML file") != std::string::npos);
  CHECK(load_error(t.str()).find("a directory") != std::string::npos);
  auto fifo = t.path() / "fifo.xml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(load_error(fifo.string()).find("a FIFO") != std::string::npos);
  CHECK(load_error("/dev/zero").find("a character device") != std::string::npos);

  auto v3 = load_error(data("fakecpukinds.v3.xml"));
  CAPTURE(v3);
  CHECK(v3.find("format 3.0") != std::string::npos);
  CHECK(v3.find("Debian 12") != std::string::npos);
  CHECK(v3.find("lstopo --of v2xml") != std::string::npos);

  auto text = t.path() / "profile.toml";
  write_file(text, "name = \"not xml\"\n");
  auto garbage = load_error(text.string());
  CAPTURE(garbage);
  CHECK(garbage.find("it said:") != std::string::npos);
  CHECK(garbage.find("parse") != std::string::npos);

  const std::string whole = read_file(data("16em64t-4s2c2t.xml"));
  auto cut = t.path() / "cut.xml";
  write_file(cut, whole.substr(0, whole.size() / 2));
  auto truncated = load_error(cut.string());
  CAPTURE(truncated);
  CHECK(truncated.find("it said:") != std::string::npos);
}

TEST_CASE("an export that crashes hwloc 2.9 is refused, not loaded") {
  // Found by fuzz_topology: a cut and spliced 2xEPYC 7451 export on which
  // hwloc 2.9 (and lstopo 2.9) dereference a NULL cpuset.
  auto why = load_error(data("crashes-hwloc-2.9.xml"));
  CAPTURE(why);
  CHECK(why.find("crashes reading it") != std::string::npos);
}

TEST_CASE("a type at two levels of the hierarchy is refused, and a root of any type is read") {
  // Found by fuzz_topology: a root retyped Package puts packages at two
  // depths, where hwloc counts -1 of them and gives none by index.
  const std::string k8 = read_file(data("AMD-K8-SantaRosa-2xOpteron-2218.xml"));
  // k8 with every `type="from"` typed `to` instead.
  auto retyped = [&](const std::string& from, const std::string& to) {
    const std::string was = "type=\"" + from + "\"", now = "type=\"" + to + "\"";
    std::string s = k8;
    size_t n = 0;
    for (auto at = s.find(was); at != std::string::npos; at = s.find(was, at + now.size()), ++n)
      s.replace(at, was.size(), now);
    REQUIRE(n > 0);
    return s;
  };
  TempDir t;
  auto two = t.path() / "two-levels.xml";
  write_file(two, retyped("Machine", "Package"));
  auto why = load_error(two.string());
  CAPTURE(why);
  CHECK(why.find("packages at more than one level") != std::string::npos);
  CHECK(why.find("two-levels.xml") != std::string::npos);

  // No L3 and no packages: one synthetic domain from the root, whatever the
  // root's type.
  auto grouped = t.path() / "grouped.xml";
  write_file(grouped, retyped("Package", "Group"));
  auto topo = from_xml(grouped.string());
  REQUIRE(topo.l3_domains.size() == 1);
  CHECK(topo.l3_domains[0].synthetic);
  CHECK(topo.l3_domains[0].cores.size() == topo.cores.size());
  CHECK(topo.cores.size() == 4);
}
