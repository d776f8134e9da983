// `profile generate`: a profile from the detected topology for every
// generation, checked against the built-ins where one exists, and against the
// hosts that make it hard: two sockets, NPS1/2/4, SMT on and off, no resctrl,
// a topology XML with no host behind it.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "fixture/fixture_cache.hpp"
#include "host/discover.hpp"
#include "profile/detect.hpp"
#include "profile/generate.hpp"
#include "profile/resolve.hpp"

using namespace epyctune;
using epyctune::testing::cached_fixture;

namespace {

struct Gen {
  host::Topology topo;
  profile::GeneratedProfile g;
};

Gen generate_on(const std::filesystem::path& dir, const profile::GenerateOptions& o = {}) {
  host::Sysroot root(dir);
  Gen r{host::discover(root), {}};
  profile::HostFacts facts;
  facts.sys = &root;
  facts.capabilities = host::probe_capabilities(root, r.topo);
  facts.l3cat = facts.capabilities->l3cat;
  r.g = profile::generate_profile(r.topo, facts, o);
  return r;
}

Gen generate_on(const std::string& machine, int nps = 1, bool smt = true, bool resctrl = true) {
  fixture::FixtureOptions o;
  o.machine = machine;
  o.nps = nps;
  o.smt = smt;
  o.resctrl_mounted = resctrl;
  return generate_on(cached_fixture(o));
}

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// Every line that sets a value carries a reason, or follows a comment that
// gives the reason for its group (the CAT masks, the notes, the roofline).
void every_value_has_a_reason(const std::string& text) {
  std::istringstream in(text);
  int unexplained = 0;
  bool commented_group = false;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '[') {
      commented_group = false;
      continue;
    }
    if (line[0] == '#') {
      commented_group = true;
      continue;
    }
    if (line[0] == ' ' || line[0] == ']' || line.find(" = ") == std::string::npos) continue;
    if (!has(line, " # ") && !commented_group) {
      INFO("no reason: ", line);
      ++unexplained;
    }
  }
  CHECK(unexplained == 0);
}

}  // namespace

TEST_CASE("generate on the lineup: the built-in's partition, a profile that validates") {
  // machine, the built-in it must agree with
  const std::pair<const char*, const char*> lineup[] = {
      {"9655", "9655"}, {"9755", "9755"},       {"9965", "9965"},
      {"9654", "9654"}, {"9654-2s", "9654-2s"}, {"7763-2s", "7763"},
      {"9754", "9754"}, {"9354", "9354"},       {"7543-2s", "7543"},
  };
  for (auto [machine, builtin] : lineup) {
    CAPTURE(machine);
    auto r = generate_on(std::string(machine), 1, false);
    every_value_has_a_reason(r.g.text);
    auto b = profile::resolve_partition(profile::load_profile(builtin), r.topo);
    CHECK(r.g.partition.draft.cpus == b.draft.cpus);
    CHECK(r.g.partition.verify.cpus == b.verify.cpus);
    CHECK(r.g.partition.housekeeping_cpus == b.housekeeping_cpus);
    // The hardware section describes the same machine as the built-in.
    const auto& gh = r.g.profile.hardware;
    const auto& bh = profile::load_profile(builtin).hardware;
    CHECK(gh.sockets == bh.sockets);
    CHECK(gh.cores_per_socket == bh.cores_per_socket);
    CHECK(gh.ccds_per_socket == bh.ccds_per_socket);
    CHECK(gh.l3_domains_per_socket == bh.l3_domains_per_socket);
    CHECK(gh.cores_per_l3 == bh.cores_per_l3);
    CHECK(gh.l3_bytes == bh.l3_bytes);
    CHECK(gh.memory_channels == bh.memory_channels);
    CHECK(gh.memory_type == bh.memory_type);
    CHECK(gh.memory_bandwidth_gbs == doctest::Approx(bh.memory_bandwidth_gbs));
    CHECK(r.g.profile.prefetch.enabled == profile::load_profile(builtin).prefetch.enabled);
    CHECK(profile::match_profile(r.g.profile, r.topo).matches);
  }
}

TEST_CASE("generate: Zen 5 writes only the documented PrefetchControl bits; Zen 3 and Zen refuse") {
  auto turin = generate_on("9655", 1, false);
  CHECK(turin.g.profile.prefetch.enabled);
  CHECK(turin.g.profile.prefetch.mask == 0x2F);
  CHECK(has(turin.g.text, "0x3C0"));
  CHECK(turin.g.profile.hardware.family == 26);
  CHECK(turin.g.profile.hardware.codename == "Turin");
  auto dense = generate_on("9965", 1, false);
  CHECK(dense.g.profile.hardware.ccds_per_socket == 12);
  CHECK(dense.g.profile.hardware.cores_per_l3 == 16);
  CHECK(has(dense.g.text, "Zen 4c had two"));
  auto milan = generate_on("7763-2s", 1, false);
  CHECK_FALSE(milan.g.profile.prefetch.enabled);
  CHECK(has(milan.g.text, "no PrefetchControl MSR"));
  auto naples = generate_on("7451-2s", 1, false);
  CHECK_FALSE(naples.g.profile.prefetch.enabled);
}

TEST_CASE("generate: Zen/Zen 2 and Zen 4c give the draft a whole CCD of two L3 domains") {
  auto naples = generate_on("7451-2s", 4, false);
  const auto& p = naples.g.profile;
  CHECK(p.name == "epyc-7451-2s-generated");
  CHECK(p.partition.draft_l3 == std::vector<int>{0, 1});  // die 0: CCX 0 and CCX 1
  CHECK(p.partition.housekeeping_cores == std::vector<int>{0, 24});
  CHECK(p.hardware.ccds_per_socket == 4);
  CHECK(p.hardware.l3_domains_per_socket == 8);
  CHECK(p.hardware.l3_bytes == 8ull << 20);
  CHECK(p.hardware.memory_type == "DDR4-2666");
  CHECK(p.bios.expect_nps == 4);
  CHECK(naples.g.partition.draft.nodes == std::vector<int>{0});
  auto bergamo = generate_on("9754", 1, false);
  CHECK(bergamo.g.profile.partition.draft_l3 == std::vector<int>{0, 1});
}

TEST_CASE("generate: one and two sockets") {
  auto one = generate_on("9654", 1, false);
  CHECK(one.g.profile.hardware.sockets == 1);
  CHECK(one.g.profile.partition.housekeeping_cores == std::vector<int>{0, 1});
  CHECK(one.g.profile.name == "epyc-9654-generated");
  auto two = generate_on("9654-2s", 1, false);
  CHECK(two.g.profile.hardware.sockets == 2);
  CHECK(two.g.profile.name == "epyc-9654-2s-generated");
  // Housekeeping on each socket's first cores, so each socket's IRQs stay local.
  CHECK(two.g.profile.partition.housekeeping_cores == std::vector<int>{0, 1, 96, 97});
  CHECK(two.g.partition.verify.nodes == std::vector<int>{0, 1});
  CHECK(two.g.profile.expectations.at("roofline") == doctest::Approx(236.3));
  // Hugepages over both nodes: half each.
  CHECK(has(two.g.text, "over 2 node(s)"));
}

TEST_CASE("generate: NPS1, NPS2 and NPS4 each keep their NPS and spread the hugepages") {
  int64_t pages_nps1 = 0;
  for (int nps : {1, 2, 4}) {
    CAPTURE(nps);
    auto r = generate_on("9654", nps, false);
    CHECK(r.g.profile.bios.expect_nps == nps);
    CHECK(r.g.partition.draft.nodes == std::vector<int>{0});
    CHECK(static_cast<int>(r.g.partition.verify.nodes.size()) == nps);
    int64_t pages = profile::auto_hugepages_2m_per_node(r.g.profile.numa, nps);
    if (nps == 1) pages_nps1 = pages;
    CHECK(pages * nps >= pages_nps1);
    CHECK(pages * nps <= pages_nps1 + nps);
    CHECK(has(r.g.text, fmt::format("this host runs NPS{}", nps)));
  }
}

TEST_CASE("generate: SMT on and off") {
  auto on = generate_on("9655", 1, true);
  auto off = generate_on("9655", 1, false);
  CHECK(on.g.profile.bios.smt == "off");
  CHECK(off.g.profile.bios.smt == "off");
  CHECK_FALSE(on.g.profile.partition.use_smt_siblings);
  CHECK(has(on.g.text, "2 threads per core now"));
  CHECK(has(off.g.text, "already off on this host"));
  // Same cores either way; with SMT on the siblings idle.
  CHECK(on.g.partition.draft.cpus == off.g.partition.draft.cpus);
  CHECK(on.g.partition.idle_sibling_cpus.size() == 94);
  CHECK(off.g.partition.idle_sibling_cpus.empty());
}

TEST_CASE("generate: CAT masks come from the host's cbm_mask; no resctrl turns CAT off") {
  auto r = generate_on("9654", 1, false);
  CHECK(r.g.profile.cat.enabled);
  CHECK(r.g.profile.cat.draft_cbm == "fff0");
  CHECK(r.g.profile.cat.default_cbm == "000f");
  CHECK(r.g.profile.cat.verify_cbm == "all");
  // A 20-way mask: the root group keeps 5 ways.
  testing::ScratchDir dir;
  fixture::FixtureOptions o;
  o.machine = "9354";
  o.smt = false;
  fixture::create_fixture(dir.path(), o);
  std::ofstream(dir.path() / "sys/fs/resctrl/info/L3/cbm_mask") << "fffff\n";
  auto wide = generate_on(dir.path());
  CHECK(wide.g.profile.cat.default_cbm == "0001f");
  CHECK(wide.g.profile.cat.draft_cbm == "fffe0");
  // resctrl not mounted, and a part without L3 CAT.
  auto none = generate_on("9654", 1, false, false);
  CHECK_FALSE(none.g.profile.cat.enabled);
  CHECK(has(none.g.text, "enabled = false"));
  auto naples = generate_on("7451-2s", 1, false);
  CHECK_FALSE(naples.g.profile.cat.enabled);
}

TEST_CASE("generate: model sizes size the hugepages and the draft's L3 domains") {
  profile::GenerateOptions o;
  o.target = {40'000'000'000, "/models/70b.gguf"};
  o.draft = {50'000'000, "/models/tiny-draft.gguf"};
  auto r = generate_on(cached_fixture([] {
                         fixture::FixtureOptions f;
                         f.machine = "9655";
                         f.smt = false;
                         return f;
                       }()),
                       o);
  // 50 MB of draft weights fit in two 32 MiB L3s: the draft runs from cache.
  CHECK(r.g.profile.partition.draft_l3 == std::vector<int>{0, 1});
  CHECK(has(r.g.text, "fits in the L3 of 2 domain(s)"));
  CHECK(r.g.profile.numa.model_gb == doctest::Approx(37.3));
  CHECK(has(r.g.text, "/models/70b.gguf"));
  // More than the nodes can hold is refused, naming the fix.
  o.target = {700ull << 30, "/models/huge.gguf"};
  CHECK_THROWS_WITH_AS(generate_on(cached_fixture("9655"), o), doctest::Contains("--model"),
                       profile::GenerateError);
  // A name that cannot be a profile name.
  profile::GenerateOptions bad;
  bad.name = "my profile";
  CHECK_THROWS_WITH_AS(generate_on(cached_fixture("9655"), bad), doctest::Contains("--name"),
                       profile::GenerateError);
}

TEST_CASE("generate: the same host gives the same text") {
  auto a = generate_on("9755", 2, false);
  auto b = generate_on("9755", 2, false);
  CHECK(a.g.text == b.g.text);
}

TEST_CASE("generate from a topology XML: Naples's real dump; refusals name what is missing") {
  auto xml = [](const std::string& f) {
    host::DiscoverOptions opt;
    opt.topology_xml = std::string(EPYCTUNE_TEST_DATA) + "/topology/" + f;
    return host::discover(host::Sysroot("/nonexistent-root"), opt);
  };
  auto t = xml("AMD-17h-Zen-2xEpyc-7451.xml");
  auto g = profile::generate_profile(t, {}, {});
  CHECK(g.profile.partition.draft_l3 == std::vector<int>{0, 1});
  CHECK(g.profile.bios.expect_nps == 0);  // the dump has one node over both sockets
  CHECK(g.profile.cat.enabled);
  CHECK(g.profile.cat.draft_cbm == "all");
  CHECK(g.profile.hardware.family == 23);
  CHECK(has(g.text, "no resctrl rules in a topology XML"));
  CHECK_THROWS_WITH_AS(profile::generate_profile(xml("Intel-Skylake-2xXeon6140.xml"), {}, {}),
                       doctest::Contains("AMD EPYC hosts only"), profile::GenerateError);
  CHECK_THROWS_WITH_AS(
      profile::generate_profile(xml("AMD-K8-SantaRosa-2xOpteron-2218.xml"), {}, {}),
      doctest::Contains("no L3 cache"), profile::GenerateError);
}

TEST_CASE("generate_command: the exact command for the host's source") {
  auto t = host::discover(host::Sysroot(cached_fixture("7451-2s")));
  CHECK(profile::generate_command(t, "/tmp/h", "") ==
        "epyctune profile generate --sysroot /tmp/h -o "
        "/tmp/h/etc/epyctune/profiles/epyc-7451-2s-generated.toml");
  CHECK(profile::generate_command(t, "/", "") ==
        "epyctune profile generate -o /etc/epyctune/profiles/epyc-7451-2s-generated.toml");
  CHECK(profile::generate_command(t, "/", "/tmp/my host.xml") ==
        "epyctune profile generate --topology '/tmp/my host.xml' -o "
        "epyc-7451-2s-generated.toml");
}
